"""Efficient Attention.

Shen et al., "Efficient Attention: Attention with Linear Complexities" (WACV 2021), https://arxiv.org/abs/1812.01243

Per head: keys are softmax-normalised over the token axis, queries over the channel axis; the global context
K^T V is a (d_k/h x d_v/h) matrix whatever N, and the output is Q (K^T V). No scaling. Cost O(N C^2 / h).
"""
import torch.nn as nn


class EfficientAttention(nn.Module):
    """Multi-head efficient attention (official names: ``queries``, ``keys``, ``values``, ``reprojection``).

    Args:
        dim: Channel width C.
        num_heads: Number of heads h (must divide key_dim and value_dim).
        num_tokens: Unused (any N works).
        key_dim: d_k (default C).
        value_dim: d_v (default C).
        proj_drop: Dropout after ``reprojection``.
    """

    def __init__(self, dim, num_heads=8, num_tokens=None, key_dim=None, value_dim=None, proj_drop=0.0):
        super().__init__()
        key_dim = key_dim or dim
        value_dim = value_dim or dim
        if key_dim % num_heads or value_dim % num_heads:
            raise ValueError(f"effa: key_dim={key_dim} and value_dim={value_dim} must be divisible by "
                             f"num_heads={num_heads}")
        self.num_heads = num_heads
        self.queries = nn.Linear(dim, key_dim)
        self.keys = nn.Linear(dim, key_dim)
        self.values = nn.Linear(dim, value_dim)
        self.reprojection = nn.Linear(value_dim, dim)
        self.proj_drop = nn.Dropout(proj_drop)

    def context(self, x):
        """The per-head global context K^T V, shape (B, h, d_k/h, d_v/h), independent of N."""
        B, N, _ = x.shape
        k = self.keys(x).view(B, N, self.num_heads, -1).transpose(1, 2).softmax(dim=-2)  # (B, h, N, dk), over N
        v = self.values(x).view(B, N, self.num_heads, -1).transpose(1, 2)  # (B, h, N, dv)
        return k.transpose(-2, -1) @ v

    def forward(self, x, hw=None):
        B, N, _ = x.shape
        q = self.queries(x).view(B, N, self.num_heads, -1).transpose(1, 2).softmax(dim=-1)  # over channels
        x = (q @ self.context(x)).transpose(1, 2).reshape(B, N, -1)  # (B, N, dv)
        return self.proj_drop(self.reprojection(x))
