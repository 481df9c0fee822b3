"""Backbone families. One file per family; ``vit`` is the isotropic trunk every task uses."""
from .vit import SIZES, Block, VisionTransformer, build_blocks, init_trunk

__all__ = ["SIZES", "Block", "VisionTransformer", "build_blocks", "init_trunk"]
