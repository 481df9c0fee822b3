"""Multi-head External Attention.

Guo et al., "Beyond Self-attention: External Attention using Two Linear Layers for Visual Tasks" (TPAMI 2022),
https://arxiv.org/abs/2105.02358 -- the multi-head form of the paper's EAMLP.

Two small learnable memories shared by all heads replace the keys and values: M_k = ``linear_0`` (d -> S) and
M_v = ``linear_1`` (S -> d). The attention map is normalised twice: softmax over the token axis N, then an l1
normalisation over the memory axis S. There is no 1/sqrt(d) scaling. Cost is linear in N.
"""
import torch
import torch.nn as nn


class ExternalAttention(nn.Module):
    """Multi-head external attention (EAMLP layout: ``trans_dims``, ``linear_0``, ``linear_1``, ``proj``).

    Args:
        dim: Channel width C.
        num_heads: Number of heads h; the expanded 4C features are split into 4h heads of width C / h.
        num_tokens: Unused (any N works).
        memory_size: S, the number of memory slots (64 in the paper's multi-head code).
        expansion: Width expansion of ``trans_dims`` (4 in the paper).
        attn_drop: Dropout on the doubly-normalised attention map.
        proj_drop: Dropout after ``proj``.
    """

    def __init__(self, dim, num_heads=8, num_tokens=None, memory_size=64, expansion=4, attn_drop=0.0,
                 proj_drop=0.0):
        super().__init__()
        if dim % num_heads:
            raise ValueError(f"ea: dim={dim} is not divisible by num_heads={num_heads}")
        self.num_heads = num_heads * expansion
        head_dim = dim // num_heads
        self.trans_dims = nn.Linear(dim, dim * expansion)
        self.linear_0 = nn.Linear(head_dim, memory_size)  # M_k, shared by all heads
        self.linear_1 = nn.Linear(memory_size, head_dim)  # M_v, shared by all heads
        # The official code starts M_v as M_k transposed (initialisation only; the two are not tied).
        with torch.no_grad():
            self.linear_1.weight.copy_(self.linear_0.weight.t())
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim * expansion, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x, hw=None):
        B, N, _ = x.shape
        x = self.trans_dims(x).view(B, N, self.num_heads, -1).transpose(1, 2)  # (B, 4h, N, d)
        attn = self.linear_0(x).softmax(dim=-2)  # (B, 4h, N, S), softmax over tokens
        attn = attn / (attn.sum(dim=-1, keepdim=True) + 1e-9)  # l1 over memory slots
        attn = self.attn_drop(attn)
        x = self.linear_1(attn).transpose(1, 2).reshape(B, N, -1)  # (B, N, 4C)
        return self.proj_drop(self.proj(x))
