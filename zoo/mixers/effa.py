"""Efficient Attention.

Shen et al., "Efficient Attention: Attention with Linear Complexities" (WACV 2021), https://arxiv.org/abs/1812.01243

Per head: keys are softmax-normalised over the token axis, queries over the channel axis; the global context
K^T V is a (d_k/h x d_v/h) matrix whatever N, and the output is Q (K^T V). No scaling. Cost O(N C^2 / h).

The forward computes exactly this. Sequences up to ``chunk_tokens``, and every sequence off the CPU, use the
step-by-step form (``forward_reference``); longer ones on a CPU are arranged for speed: keys and values come from one GEMM; tokens are processed in
blocks of ``chunk_tokens``, each block's keys exponentiated against the block's own max and the partial contexts
merged with log-sum-exp weights, so the working set stays in cache and the cost stays linear in N; and
``reprojection`` is folded into the context (Q (K^T V) W_r^T = Q ((K^T V) W_r^T)), which removes the (B, N, d_v)
intermediate and its head transposes.
"""
import torch
import torch.nn as nn

from ..layers.linear import linear, linear_into, onednn_linear, onednn_ready, plain


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

    code = 'effa'
    paper = 'Shen et al., Efficient Attention: Attention with Linear Complexities (WACV 2021)'
    arxiv = '1812.01243'
    summary = "Efficient Attention: softmax over the keys' tokens and the queries' channels lets the product be taken as Q (K^T V), linear in the number of tokens"
    citation = """@inproceedings{shen2021efficient,
  title     = {Efficient Attention: Attention with Linear Complexities},
  author    = {Shen, Zhuoran and Zhang, Mingyuan and Zhao, Haiyu and Yi, Shuai and Li, Hongsheng},
  booktitle = {IEEE Winter Conference on Applications of Computer Vision},
  year      = {2021}
}"""

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

    # Tokens per block: the (B, block, d_k + d_v) keys and values of one block stay in cache.
    chunk_tokens = 1024

    def context(self, x, fast=False):
        """The per-head global context K^T V, shape (B, h, d_k/h, d_v/h), independent of N.

        Keys are softmax-normalised over all N tokens. Computed block by block: each block's keys are exponentiated
        against the block's own max, and the blocks' partial contexts are merged with log-sum-exp weights.

        Args:
            x: Tokens (B, N, C).
            fast: Use oneDNN's linear (only when ``zoo.layers.linear.onednn_ready`` says so).
        """
        B, N, _ = x.shape
        h, T = self.num_heads, self.chunk_tokens
        if not plain(self.keys, self.values):  # hooked or wrapped layers: call them as modules
            k = self.keys(x).view(B, N, h, -1).transpose(1, 2).softmax(dim=-2)  # (B, h, N, dk), over tokens
            return k.transpose(-2, -1) @ self.values(x).view(B, N, h, -1).transpose(1, 2)
        dk = self.keys.out_features
        w_kv = torch.cat([self.keys.weight, self.values.weight])  # keys and values in one GEMM
        b_kv = torch.cat([self.keys.bias, self.values.bias])
        maxes, sums, ctxs = [], [], []
        for i in range(0, N, T):
            kv = linear(x[:, i:i + T], w_kv, b_kv, fast)  # (B, t, dk + dv)
            t = kv.shape[1]
            k, v = kv[..., :dk], kv[..., dk:]
            kmax = k.detach().amax(dim=1, keepdim=True)  # (B, 1, dk): a shift the softmax ignores, hence detached
            e = (k - kmax).exp_()
            maxes.append(kmax)
            sums.append(e.sum(dim=1, keepdim=True))
            e = e.view(B, t, h, -1).permute(0, 2, 3, 1)  # (B, h, dk/h, t)
            ctxs.append(e @ v.reshape(B, t, h, -1).transpose(1, 2))  # (B, h, dk/h, dv/h), unnormalised
        maxes = torch.stack(maxes)  # (blocks, B, 1, dk)
        w = (maxes - maxes.amax(dim=0)).exp()  # each block's rescaling to the global max
        denom = (torch.stack(sums) * w).sum(dim=0)  # (B, 1, dk): softmax denominators over all N tokens
        ctx = (torch.stack(ctxs) * w.view(len(ctxs), B, h, -1, 1)).sum(dim=0)
        return ctx / denom.view(B, h, -1, 1)  # (B, h, dk/h, dv/h)

    def forward(self, x):
        B, N, C = x.shape
        h, T = self.num_heads, self.chunk_tokens
        layers = (self.queries, self.keys, self.values, self.reprojection)
        # Short sequences: the direct form's flat (batch x tokens) GEMMs are as fast and blocks gain nothing; off the
        # CPU blocks only add kernel launches (docs/BENCHMARKS.md, "On a GPU"); hooked or wrapped sub-layers must see
        # their own inputs.
        if N <= T or x.device.type != "cpu" or not plain(*layers):
            return self.forward_reference(x)
        fast = onednn_ready(x, *layers)  # CPU inference: oneDNN's linear (zoo.layers.linear)
        ctx = self.context(x, fast)  # (B, h, dk/h, dv/h)
        wr = self.reprojection.weight.view(C, h, -1).permute(1, 2, 0)  # (h, dv/h, C)
        ctx = torch.matmul(ctx, wr).reshape(B, -1, C)  # (B, dk, C): context folded into the reprojection
        grad, bias = torch.is_grad_enabled(), self.reprojection.bias
        out = [] if grad else x.new_empty(B, N, C)  # without autograd the blocks are written into one output
        for i in range(0, N, T):
            q = linear(x[:, i:i + T], self.queries.weight, self.queries.bias, fast)  # (B, t, dk)
            q = q.view(*q.shape[:2], h, -1).softmax(dim=-1).view(q.shape)  # softmax over each head's channels
            if not grad and B == 1:
                linear_into(out[:, i:i + T], q, ctx[0].t(), bias, fast)
                continue
            y = linear(q, ctx[0].t(), bias, fast) if B == 1 else torch.baddbmm(bias, q, ctx)  # (B, t, C)
            if grad:
                out.append(y)
            else:
                out[:, i:i + T] = y
        if grad:
            out = torch.cat(out, dim=1) if len(out) > 1 else out[0]
        return self.proj_drop(out)

    def forward_reference(self, x):
        """The step-by-step form (same result as ``forward``; used as is for sequences up to ``chunk_tokens``)."""
        B, N, _ = x.shape
        layers = (self.queries, self.keys, self.values, self.reprojection)
        fast = onednn_ready(x, *layers)
        q, k, v = (onednn_linear(x, m.weight, m.bias) if fast else m(x) for m in layers[:3])
        k = k.view(B, N, self.num_heads, -1).transpose(1, 2).softmax(dim=-2)  # (B, h, N, dk), over tokens
        v = v.view(B, N, self.num_heads, -1).transpose(1, 2)  # (B, h, N, dv)
        q = q.view(B, N, self.num_heads, -1).transpose(1, 2).softmax(dim=-1)  # over channels
        x = (q @ (k.transpose(-2, -1) @ v)).transpose(1, 2).reshape(B, N, -1)  # (B, N, dv)
        x = onednn_linear(x, self.reprojection.weight, self.reprojection.bias) if fast else self.reprojection(x)
        return self.proj_drop(x)
