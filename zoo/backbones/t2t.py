"""Tokens-to-Token ViT (T2T-ViT) front end with a swappable token mixer in the trunk: the EAMLP family.

Yuan et al., "Tokens-to-Token ViT: Training Vision Transformers from Scratch on ImageNet" (ICCV 2021),
https://arxiv.org/abs/2101.11986; Guo et al., "Beyond Self-attention: External Attention using Two Linear Layers
for Visual Tasks" (2021), https://arxiv.org/abs/2105.02358, whose released ImageNet model EAMLP-7 (MenghaoGuo/EANet,
``EAMLP/``) is T2T-ViT-7 with external attention in every block and in the tokens-to-token stages.

Instead of a conv patch embedding, the image is cut into overlapping patches three times ("soft split", an unfold
with kernel/stride/padding 7/4/2, then 3/2/1, then 3/2/1: 16x fewer positions per side), and between the splits a
small token block re-mixes the patch vectors::

    image (B, 3, H, W) -> unfold 7/4/2 -> TokenStage (3*49 -> 64) -> fold to the grid -> unfold 3/2/1
      -> TokenStage (64*9 -> 64) -> fold -> unfold 3/2/1 -> project (64*9 -> E)      tokens (B, H/16 * W/16, E)
      -> [cls] + fixed sinusoidal position table -> [Block (zoo mixer, MLP ratio 2)] x depth -> LayerNorm -> head(cls)

A ``TokenStage`` of EAMLP is external attention over a projected token, with its own residual on the projection
(the input width differs from the output width, so the residual cannot be on the input)::

    y = in_proj(norm1(x));   y = y + proj(M_v(l1_slots(softmax_tokens(M_k(y)))));   y = y + mlp(norm2(y))

with M_k = ``linear_0`` (64 -> 128 slots, no bias), M_v = ``linear_1`` (128 -> 64). The trunk blocks are the zoo's
``Block`` with any registered mixer (``ea`` for EAMLP: 4h heads of width E/h and S = 64 shared slots). As in the
official model every LayerNorm here has eps 1e-5 (PyTorch's default), not the ViT trunk's 1e-6.

The position table is the fixed 1-D sinusoid of "Attention Is All You Need" over the 1 + N token positions, stored
as a buffer (``pos_embed``, in the state dict as in the official checkpoint, never trained). Another input size
gives another N; the table for that N is computed on the fly, exactly what the official model built for that size
uses.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import mixers
from ..layers import Mlp
from .vit import TokenTrunk, build_blocks, init_trunk

# name -> trunk size, from T2T-ViT's ``T2t_vit_7``: embed 256, 7 blocks, 4 heads, MLP ratio 2 (EAMLP-7).
SIZES = {
    "7": dict(embed_dim=256, depth=7, num_heads=4, mlp_ratio=2.0),
}

# (kernel, stride, padding) of the three soft splits; together they reduce each side 16x.
SOFT_SPLITS = ((7, 4, 2), (3, 2, 1), (3, 2, 1))
LN_EPS = 1e-5  # nn.LayerNorm's default, what the official T2T-ViT / EAMLP layers use


def _pair(v):
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v), int(v))


def t2t_grid(img_size):
    """Token grid (h, w) after the three soft splits of an input of ``img_size`` ((24, 24) for 384)."""
    h, w = _pair(img_size)
    for k, s, p in SOFT_SPLITS:
        h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return h, w


def sinusoid_table(num_positions, dim):
    """The fixed sinusoidal position table (1, num_positions, dim): sin on even channels, cos on odd ones, with
    angle pos / 10000^(2*(j//2)/dim); computed in float64 and rounded once to float32, as the official table."""
    pos = torch.arange(num_positions, dtype=torch.float64)[:, None]
    j = torch.arange(dim, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, 2 * torch.div(j, 2, rounding_mode="floor") / dim)
    table = torch.empty(num_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle[:, 0::2])
    table[:, 1::2] = torch.cos(angle[:, 1::2])
    return table.float().unsqueeze(0)


class TokenExternalAttention(nn.Module):
    """External attention of a tokens-to-token stage, projecting ``in_dim`` patch vectors to ``dim``.

    Args:
        in_dim: Width of the unfolded patch vectors (C * k * k).
        dim: Output token width (``token_dim``, 64 in T2T-ViT).
        memory_size: Memory slots S of M_k / M_v (128 in EAMLP's token stages).
        attn_drop: Dropout on the doubly-normalised map (0.1 in EAMLP, training only).
        proj_drop: Dropout after ``proj`` (0.1 in EAMLP, training only).
    """

    def __init__(self, in_dim, dim, memory_size=128, attn_drop=0.1, proj_drop=0.1):
        super().__init__()
        self.in_proj = nn.Linear(in_dim, dim)
        self.linear_0 = nn.Linear(dim, memory_size, bias=False)  # M_k
        self.linear_1 = nn.Linear(memory_size, dim)  # M_v
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x):
        y = self.in_proj(x)  # (B, N, dim): the residual branch starts here, after the change of width
        attn = self.linear_0(y).softmax(dim=-2)  # (B, N, S), softmax over tokens
        attn = attn / (attn.sum(dim=-1, keepdim=True) + 1e-9)  # l1 over memory slots
        out = self.proj(self.linear_1(self.attn_drop(attn)))
        return y + self.proj_drop(out)


class TokenStage(nn.Module):
    """One re-structurisation step between soft splits: ``mixer(norm1(x))`` then ``+ mlp(norm2(.))`` (MLP ratio 1).

    Args:
        in_dim: Width of the unfolded patch vectors.
        dim: Output token width.
        memory_size: Slots of the stage's external attention.
    """

    def __init__(self, in_dim, dim, memory_size=128):
        super().__init__()
        self.norm1 = nn.LayerNorm(in_dim, eps=LN_EPS)
        self.mixer = TokenExternalAttention(in_dim, dim, memory_size=memory_size)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, dim)

    def forward(self, x):
        x = self.mixer(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TokensToToken(nn.Module):
    """Three soft splits with a ``TokenStage`` after the first two, then a linear projection to ``embed_dim``.

    Args:
        in_chans: Image channels.
        embed_dim: Trunk width E.
        token_dim: Width of the intermediate tokens (64).
    """

    def __init__(self, in_chans=3, embed_dim=256, token_dim=64):
        super().__init__()
        k0, k1 = SOFT_SPLITS[0][0], SOFT_SPLITS[1][0]
        self.stages = nn.ModuleList([TokenStage(in_chans * k0 * k0, token_dim),
                                     TokenStage(token_dim * k1 * k1, token_dim)])
        self.project = nn.Linear(token_dim * SOFT_SPLITS[2][0] ** 2, embed_dim)

    def forward(self, x):
        """(B, C, H, W) -> tokens (B, h*w, E) and the grid (h, w)."""
        B = x.shape[0]
        h, w = x.shape[-2:]
        for i, (k, s, p) in enumerate(SOFT_SPLITS):
            if i:  # tokens back onto their grid before the next split
                x = x.transpose(1, 2).reshape(B, -1, h, w)
            x = F.unfold(x, kernel_size=k, stride=s, padding=p).transpose(1, 2)  # (B, h'*w', C*k*k)
            h, w = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
            if i < len(self.stages):
                x = self.stages[i](x)
        return self.project(x), (h, w)


class T2TViT(TokenTrunk):
    """Image classifier: tokens-to-token front end, cls token, sinusoid positions, mixer blocks, LayerNorm, head.

    Args:
        mixer: Mixer code of the trunk blocks (``ea`` for EAMLP).
        img_size: Input size (int or (H, W)); the position table is built for it (other sizes get their own table,
            except for fixed-token mixers (``ff``), which accept exactly this size).
        in_chans: Input channels.
        num_classes: Classes of the head (0: no head, ``forward`` returns pooled features).
        embed_dim, depth, num_heads, mlp_ratio: Trunk size (see ``SIZES``).
        token_dim: Width of the tokens-to-token stages.
        drop_rate, drop_path_rate: Dropout and stochastic depth of the trunk.
        mixer_options: Extra keyword arguments of the trunk mixer.
    """

    def __init__(self, mixer="ea", img_size=224, in_chans=3, num_classes=1000, embed_dim=256, depth=7, num_heads=4,
                 mlp_ratio=2.0, token_dim=64, drop_rate=0.0, drop_path_rate=0.0, mixer_options=None):
        super().__init__()
        self.mixer_name = mixer
        self.num_classes = num_classes
        self.num_features = self.embed_dim = embed_dim
        self.num_prefix_tokens = 1
        self.img_size = _pair(img_size)
        self.fixed_tokens = bool(getattr(mixers.get(mixer), "fixed_tokens", False))
        self.tokens_to_token = TokensToToken(in_chans=in_chans, embed_dim=embed_dim, token_dim=token_dim)
        self.grid_size = t2t_grid(self.img_size)
        self.num_tokens = 1 + self.grid_size[0] * self.grid_size[1]
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.register_buffer("pos_embed", sinusoid_table(self.num_tokens, embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        self.blocks = build_blocks(embed_dim, depth, num_heads, mixer=mixer, num_tokens=self.num_tokens,
                                   mlp_ratio=mlp_ratio, drop_rate=drop_rate, drop_path_rate=drop_path_rate,
                                   mixer_options=mixer_options)
        for m in self.blocks.modules():  # the zoo Block's LayerNorms use 1e-6; T2T-ViT trained with 1e-5
            if isinstance(m, nn.LayerNorm):
                m.eps = LN_EPS
        self.norm = nn.LayerNorm(embed_dim, eps=LN_EPS)
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        self.feature_info = [dict(num_chs=embed_dim, reduction=16, module=f"blocks.{i}") for i in range(depth)]
        self.init_weights()

    def init_weights(self):
        """timm-style init (trunc-normal 0.02 linears, zero biases, unit LayerNorms), cls token trunc-normal 0.02;
        every external attention starts with M_v = M_k^T as in the official code."""
        init_trunk(self)
        nn.init.trunc_normal_(self.cls_token, std=0.02)
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, TokenExternalAttention):
                    m.linear_1.weight.copy_(m.linear_0.weight.t())

    @torch.jit.ignore
    def no_weight_decay(self):
        """Parameter names excluded from weight decay."""
        return {"cls_token"}

    # -- forward ----------------------------------------------------------------------------------------------
    def _embed(self, x):
        if x.ndim != 4:
            raise ValueError(f"expected an image batch (B, C, H, W), got a tensor of shape {tuple(x.shape)}")
        if self.fixed_tokens and tuple(x.shape[-2:]) != self.img_size:
            raise ValueError(f"this model has a fixed token count and expects {self.img_size[0]}x{self.img_size[1]} "
                             f"inputs, got {x.shape[-2]}x{x.shape[-1]}")
        x, hw = self.tokens_to_token(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        pos = self.pos_embed
        if pos.shape[1] != x.shape[1]:  # another input size: the table the official model has for that size
            pos = sinusoid_table(x.shape[1], self.embed_dim).to(x)
        return self.pos_drop(x + pos), hw


def build(mixer="ea", size="7", **kwargs):
    """A ``T2TViT`` classifier of a registered size (``zoo.heads.cls.build`` calls this for ``*_t2t_*`` names).

    Args:
        mixer: Mixer code of the trunk blocks.
        size: Key of ``SIZES``.
        **kwargs: ``T2TViT`` arguments (``img_size``, ``num_classes``, ``in_chans``, ``drop_path_rate``, ...).
    """
    if size not in SIZES:
        raise ValueError(f"unknown T2T-ViT size {size!r}; sizes: {', '.join(SIZES)}")
    if "patch_size" in kwargs:
        patch = kwargs.pop("patch_size")
        if patch not in (None, 16):  # the three soft splits fix the reduction at 16
            raise ValueError(f"T2T-ViT tokenises with three soft splits (reduction 16); patch_size={patch} is not "
                             f"available for this family")
    return T2TViT(mixer=mixer, **SIZES[size], **kwargs)


__all__ = ["SIZES", "SOFT_SPLITS", "T2TViT", "TokenExternalAttention", "TokenStage", "TokensToToken", "build",
           "sinusoid_table", "t2t_grid"]
