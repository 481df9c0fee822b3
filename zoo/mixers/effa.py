"""Efficient Attention.

Shen et al., "Efficient Attention: Attention with Linear Complexities" (WACV 2021), https://arxiv.org/abs/1812.01243

Per head: keys are softmax-normalised over the token axis, queries over the channel axis; the global context
K^T V is a (d_k/h x d_v/h) matrix whatever N, and the output is Q (K^T V). No scaling. Cost O(N C^2 / h).

The forward computes exactly this. Sequences up to ``chunk_tokens`` use the step-by-step form
(``forward_reference``); longer ones are arranged for speed: keys are produced with tokens last so their softmax over tokens runs along contiguous rows; tokens are processed in blocks
of ``chunk_tokens`` with an online (running max / sum) softmax, accumulating the context block by block so the
working set stays in cache; and ``reprojection`` is folded into the context (Q (K^T V) W_r^T = Q ((K^T V) W_r^T)),
which removes the (B, N, d_v) intermediate and its head transposes.
"""
import torch
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

    # Tokens per block: the (B, d_k, block) keys and (B, block, d_v) values of one block stay in cache.
    chunk_tokens = 1024

    def context(self, x):
        """The per-head global context K^T V, shape (B, h, d_k/h, d_v/h), independent of N.

        Keys are softmax-normalised over all N tokens; computed block by block with a running max and sum.
        """
        B, N, _ = x.shape
        h, T = self.num_heads, self.chunk_tokens
        wk, bk = self.keys.weight.expand(B, -1, -1), self.keys.bias[:, None]
        ctx = m = s = None
        for i in range(0, N, T):
            xc = x[:, i:i + T]
            k = torch.baddbmm(bk, wk, xc.transpose(1, 2)).view(B, h, -1, xc.shape[1])  # (B, h, dk, t), tokens last
            v = self.values(xc).view(B, xc.shape[1], h, -1).transpose(1, 2)  # (B, h, t, dv)
            kmax = k.amax(dim=-1, keepdim=True)
            if m is None:
                m = kmax
                e = (k - m).exp()
                s, ctx = e.sum(dim=-1, keepdim=True), e @ v
            else:
                m_new = torch.maximum(m, kmax)
                scale = (m - m_new).exp()  # rescales what was accumulated under the old running max
                e = (k - m_new).exp()
                s = s * scale + e.sum(dim=-1, keepdim=True)
                ctx = ctx * scale + e @ v
                m = m_new
        return ctx / s  # (B, h, dk, dv)

    def forward(self, x, hw=None):
        B, N, C = x.shape
        h, T = self.num_heads, self.chunk_tokens
        if N <= T:  # short sequences: the direct form's flat (batch x tokens) GEMMs are faster, blocks gain nothing
            return self.forward_reference(x, hw)
        ctx = self.context(x)  # (B, h, dk, dv)
        wr = self.reprojection.weight.view(C, h, -1).permute(1, 2, 0)  # (h, dv, C)
        ctx = torch.matmul(ctx, wr).reshape(B, -1, C)  # (B, h*dk, C): context folded into the reprojection
        out = []
        for i in range(0, N, T):
            q = self.queries(x[:, i:i + T])  # (B, t, dk)
            q = q.view(*q.shape[:2], h, -1).softmax(dim=-1).view(q.shape)  # softmax over each head's channels
            out.append(torch.baddbmm(self.reprojection.bias, q, ctx))  # (B, t, C)
        return self.proj_drop(torch.cat(out, dim=1) if len(out) > 1 else out[0])

    def forward_reference(self, x, hw=None):
        """The step-by-step form (same result as ``forward``; used as is for sequences up to ``chunk_tokens``)."""
        B, N, _ = x.shape
        k = self.keys(x).view(B, N, self.num_heads, -1).transpose(1, 2).softmax(dim=-2)  # (B, h, N, dk), over N
        v = self.values(x).view(B, N, self.num_heads, -1).transpose(1, 2)  # (B, h, N, dv)
        q = self.queries(x).view(B, N, self.num_heads, -1).transpose(1, 2).softmax(dim=-1)  # over channels
        x = (q @ (k.transpose(-2, -1) @ v)).transpose(1, 2).reshape(B, N, -1)  # (B, N, dv)
        return self.proj_drop(self.reprojection(x))
