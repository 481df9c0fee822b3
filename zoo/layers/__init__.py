"""Small building bricks shared by the backbones and heads."""
from .mlp import DropPath, Mlp
from .patch_embed import PatchEmbed, resample_pos_embed

__all__ = ["DropPath", "Mlp", "PatchEmbed", "resample_pos_embed"]
