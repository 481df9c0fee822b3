"""Image to patch tokens, and position-embedding resampling for a different grid."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


class PatchEmbed(nn.Module):
    """Non-overlapping conv patch embedding (timm name ``proj``): (B, C, H, W) -> (B, N, D) with its grid.

    Args:
        img_size: Expected input size (int or (H, W)); used for the grid and, if ``strict``, checked.
        patch_size: Patch side.
        in_chans: Input channels.
        embed_dim: Token width D.
        strict: Refuse inputs of another size (models whose token count is fixed, e.g. ``ff``).
    """

    def __init__(self, img_size=224, patch_size=16, in_chans=3, embed_dim=768, strict=False):
        super().__init__()
        self.img_size = _pair(img_size)
        self.patch_size = _pair(patch_size)
        self.grid_size = (self.img_size[0] // self.patch_size[0], self.img_size[1] // self.patch_size[1])
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.strict = strict
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=self.patch_size)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"expected an image batch (B, C, H, W), got a tensor of shape {tuple(x.shape)}")
        H, W = x.shape[-2:]
        if self.strict and (H, W) != self.img_size:
            raise ValueError(f"this model has a fixed token count and expects {self.img_size[0]}x{self.img_size[1]} "
                             f"inputs, got {H}x{W}; resize the input or build the model with img_size=({H}, {W})")
        if H % self.patch_size[0] or W % self.patch_size[1]:
            raise ValueError(f"input size {H}x{W} is not divisible by the patch size {self.patch_size}")
        x = self.proj(x)  # (B, D, gh, gw)
        hw = x.shape[-2:]
        return x.flatten(2).transpose(1, 2), tuple(hw)


def resample_pos_embed(pos_embed, new_size, num_prefix_tokens=1, old_size=None):
    """Bicubically resample a (1, prefix + gh*gw, D) position embedding to the grid ``new_size`` (h, w)."""
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    n = grid.shape[1]
    if old_size is None:
        side = int(math.isqrt(n))
        if side * side != n:
            raise ValueError(f"cannot infer the grid of a position embedding with {n} patch tokens; pass old_size")
        old_size = (side, side)
    new_size = _pair(new_size)
    if tuple(old_size) == tuple(new_size):
        return pos_embed
    D = grid.shape[-1]
    grid = grid.reshape(1, old_size[0], old_size[1], D).permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=new_size, mode="bicubic", align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_size[0] * new_size[1], D).to(pos_embed.dtype)
    return grid if num_prefix_tokens == 0 else torch.cat([prefix, grid], dim=1)
