"""Small building bricks shared by the backbones and heads."""
from .mlp import DropPath, Mlp
from .patch_embed import PatchEmbed, adapt_in_chans, resample_pos_embed

__all__ = ["DropPath", "Mlp", "PatchEmbed", "adapt_in_chans", "resample_pos_embed"]
