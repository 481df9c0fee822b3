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
        self.patch_size = _pair(patch_size)
        self.set_img_size(img_size)
        self.strict = strict
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=self.patch_size, stride=self.patch_size)

    def set_img_size(self, img_size):
        """Make ``img_size`` the expected input size (the grid follows)."""
        self.img_size = _pair(img_size)
        self.grid_size = (self.img_size[0] // self.patch_size[0], self.img_size[1] // self.patch_size[1])
        self.num_patches = self.grid_size[0] * self.grid_size[1]

    def set_in_chans(self, in_chans):
        """Take ``in_chans`` input channels, the kernel adapted by ``adapt_in_chans`` (the bias is kept)."""
        old = self.proj
        with torch.no_grad():
            weight = adapt_in_chans(old.weight, in_chans)
        self.proj = nn.Conv2d(in_chans, old.out_channels, kernel_size=old.kernel_size, stride=old.stride,
                              bias=old.bias is not None).to(old.weight)
        with torch.no_grad():
            self.proj.weight.copy_(weight)
            if old.bias is not None:
                self.proj.bias.copy_(old.bias)

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"expected an image batch (B, C, H, W), got a tensor of shape {tuple(x.shape)}")
        H, W = x.shape[-2:]
        if x.shape[1] != self.proj.in_channels:
            raise ValueError(f"this model takes {self.proj.in_channels}-channel images, got {x.shape[1]} channels "
                             f"(input shape {tuple(x.shape)}); convert the images, or build the model with "
                             f"in_chans={x.shape[1]} (pretrained weights are adapted: zoo.load(..., pretrained=True, "
                             f"in_chans={x.shape[1]}))")
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


def adapt_in_chans(weight, in_chans):
    """A patch-embedding kernel (D, C, kh, kw) for ``in_chans`` input channels, as timm adapts pretrained weights.

    1 -> C repeats the kernel and divides it by C, so a grey image given as C equal channels gets the response it
    had; C -> 1 sums the kernel over channels (the response to a grey image the C-channel model saw as C equal
    channels). Any other change has no such identity and is a ``ValueError``.
    """
    have = weight.shape[1]
    if have == in_chans:
        return weight
    if have == 1:
        return weight.repeat(1, in_chans, 1, 1) / in_chans
    if in_chans == 1:
        return weight.sum(dim=1, keepdim=True)
    raise ValueError(f"a patch embedding for {have} input channels does not adapt to in_chans={in_chans} (only "
                     f"1 -> C and C -> 1 do); build the model with in_chans={have}")
