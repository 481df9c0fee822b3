"""Multi-head External Attention.

Guo et al., "Beyond Self-attention: External Attention using Two Linear Layers for Visual Tasks" (TPAMI 2022),
https://arxiv.org/abs/2105.02358 -- the multi-head form of the paper's EAMLP.

Two small learnable memories shared by all heads replace the keys and values: M_k = ``linear_0`` (d -> S) and
M_v = ``linear_1`` (S -> d). The attention map is normalised twice: softmax over the token axis N, then an l1
normalisation over the memory axis S. There is no 1/sqrt(d) scaling. Cost is linear in N.

The forward computes exactly this, arranged for speed (``forward_reference`` is the step-by-step form):

- M_k is a per-head linear map after ``trans_dims``, so the two fold into one (4h*S x C) matrix, and M_v folds
  into ``proj`` the same way: two GEMMs per token instead of four, and no (B, N, 4C) intermediate.
- Tokens are processed in blocks of ``chunk_tokens``: each block's logits are exponentiated once against the block's
  own max, and the softmax over all N tokens is finished with per-block rescaling factors (the log-sum-exp merge), so
  the (block x 4h*S) working set stays in cache and the cost stays linear in N for long sequences (CPU inference;
  other devices run one block, ``token_block``).
- At CPU inference the exps skip the shift by the block's max (one reduction and one pass over the map fewer) where a
  bound proves it safe: |x_n . wa_c| <= max_n |x_n| * max_c |wa_c| (Cauchy-Schwarz), and while that is at most
  ``87 - ln N`` no exp, nor the sum of N of them, can leave float32's normal range, so the softmax is the shifted
  one to float rounding. Larger logits take the shifted path.
- With autograd, the double normalisation is one function with a hand-written backward (``double_normalise``): it
  keeps one (B, N, 4h*S) map for the backward pass, where autograd's chain of exp, sums, products and a division
  kept several, and spends fewer passes over it.
"""
import math

import torch
import torch.nn as nn
from torch.autograd.function import once_differentiable

from ..layers.linear import _compiling, autocast_on, linear, linear_into, onednn_ready, plain


class _DoubleNormalise(torch.autograd.Function):
    """Softmax over the token axis of ``z`` (B, N, H*S), then l1 normalisation over each head's S memory slots.

    Backward, with a the softmax, s = sum_S a + eps and y = a / s the output (only y and s are kept): the l1 step
    gives g_a = (g_y - t) / s with t = sum_S(g_y * y), and the softmax over tokens g_z = a * (g_a - sum_N(g_a * a)).
    As a * g_a = y * (g_y - t) =: u, that is g_z = u - y * s * sum_N(u): no division, three passes of full size.
    """

    @staticmethod
    def forward(ctx, z, heads, eps):
        B, N, HS = z.shape
        a = torch.softmax(z, dim=1).view(B, N, heads, HS // heads)
        s = a.sum(dim=-1, keepdim=True).add_(eps)
        y = a.div_(s).view(B, N, HS)
        ctx.heads, ctx.dtype = heads, z.dtype
        ctx.save_for_backward(y, s)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        y, s = ctx.saved_tensors
        B, N, HS = y.shape
        y = y.view(B, N, ctx.heads, HS // ctx.heads)
        g = grad.reshape(y.shape)
        u = g * y
        u = torch.sub(g, u.sum(dim=-1, keepdim=True), out=u).mul_(y)  # y * (g_y - t)
        r = u.sum(dim=1, keepdim=True)  # (B, 1, heads, S)
        return u.sub_(y * s * r).view(B, N, HS).to(ctx.dtype), None, None


def double_normalise(z, heads, eps=1e-9):
    """EA's attention map from its logits ``z`` (B, N, heads*S): the softmax a over the N tokens, then l1 over each
    head's S slots (``a / (sum_S a + eps)``), with a fused backward (``_DoubleNormalise``)."""
    return _DoubleNormalise.apply(z, heads, eps)


class ExternalAttention(nn.Module):
    """Multi-head external attention (EAMLP layout: ``trans_dims``, ``linear_0``, ``linear_1``, ``proj``).

    Forward hooks on the sub-layers (e.g. on ``linear_1`` to read the attention map) are honoured: when one is
    registered, or a sub-layer is replaced by another module, the step-by-step ``forward_reference`` runs, so the
    hook sees the (B, 4h, N, S) map.

    Args:
        dim: Channel width C.
        num_heads: Number of heads h; the expanded 4C features are split into 4h heads of width C / h.
        num_tokens: Unused (any N works).
        memory_size: S, the number of memory slots (64 in the paper's multi-head code).
        expansion: Width expansion of ``trans_dims`` (4 in the paper).
        attn_drop: Dropout on the doubly-normalised attention map.
        proj_drop: Dropout after ``proj``.
    """

    code = 'ea'
    paper = 'Guo et al., Beyond Self-attention: External Attention using Two Linear Layers for Visual Tasks (2021)'
    arxiv = '2105.02358'
    summary = 'External Attention: two small learned memories shared by all samples replace keys and values, softmax over tokens then l1 normalisation over the memory slots, O(N)'
    citation = """@article{guo2021external,
  title   = {Beyond Self-attention: External Attention using Two Linear Layers for Visual Tasks},
  author  = {Guo, Meng-Hao and Liu, Zheng-Ning and Mu, Tai-Jiang and Hu, Shi-Min},
  journal = {arXiv preprint arXiv:2105.02358},
  year    = {2021}
}"""

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

    # Tokens per block of the fused forward: a (block x 4h*S) float32 block of a few MB stays in cache. 1,024 rather
    # than 512: on the 2-core Zen 3 EPYC the mixer alone at 4,097 tokens took 0.96x the time, and the segmentor's
    # predict 0.98-1.00x at 1024 and 2048 px (`tools/benchmark.py --only ea-chunk`, two runs; docs/BENCHMARKS.md "The
    # FLOP ceiling of the ratios"); the earlier runs on an AVX-512 EPYC put 512 and 1,024 within their noise.
    chunk_tokens = 1024


    def folded_weights(self):
        """M_k folded into ``trans_dims`` and M_v into ``proj``.

        Returns:
            ``(Wa (4h*S, C), ba (4h*S,), Wb (C, 4h*S), bb (C,))`` with logits = x Wa^T + ba (per head and slot) and
            output = attn Wb^T + bb, where attn is the (N, 4h*S) doubly-normalised map.
        """
        H = self.num_heads
        S, d = self.linear_0.weight.shape
        C = self.proj.out_features
        w0, w1 = self.linear_0.weight, self.linear_1.weight  # (S, d), (d, S)
        # one (S x d) @ (d x C) product per head, written straight into the (4h, S, C) layout
        wa = torch.bmm(w0.expand(H, S, d), self.trans_dims.weight.view(H, d, C)).view(H * S, C)
        ba = (self.trans_dims.bias.view(H, d) @ w0.t() + self.linear_0.bias).reshape(H * S)
        wp = self.proj.weight.view(C, H, d)
        wb = (wp.reshape(C * H, d) @ w1).view(C, H * S)  # (C*4h, S): proj's per-head blocks times M_v
        bb = self.proj.bias + wp.sum(dim=1) @ self.linear_1.bias  # M_v's bias reaches every head alike
        return wa, ba, wb, bb

    def forward(self, x):
        layers = (self.trans_dims, self.linear_0, self.linear_1, self.proj)
        if not plain(*layers):  # hooked or wrapped sub-layers must see their own inputs: run the step-by-step form
            return self.forward_reference(x)
        fast = onednn_ready(x, *layers)  # CPU inference: oneDNN's linear (zoo.layers.linear)
        wa, ba, wb, bb = self.folded_weights()
        if not (torch.is_grad_enabled() or self.training):
            return self._infer(x, wa, wb, bb, fast, shift=not self._logits_bounded(x, wa))
        # Autograd keeps the whole map for the backward pass anyway, so no token blocks here.
        attn = double_normalise(linear(x, wa, ba, fast), self.num_heads)  # (B, N, 4h*S)
        return self.proj_drop(linear(self.attn_drop(attn), wb, bb, fast))  # (B, N, C)

    def token_block(self, x):
        """Tokens per block of the inference path: ``chunk_tokens`` on a CPU (a block's map stays in cache); all of
        them on other devices, where blocks only add kernel launches (docs/BENCHMARKS.md, "On a GPU")."""
        return self.chunk_tokens if x.device.type == "cpu" else x.shape[1]

    @staticmethod
    def exp_limit(num_tokens):
        """The largest |logit| for which exp needs no shift over ``num_tokens`` tokens: e^L and N e^L stay below
        float32's largest value (e^88.7) and e^-L above its least normal one (e^-87.3), with one unit to spare."""
        return min(87.0, 88.7 - math.log(max(num_tokens, 1))) - 1.0

    def _logits_bounded(self, x, wa):
        """True where every logit ``x_n . wa_c`` is provably within ``exp_limit`` (|x_n| |wa_c| bounds it), so the
        exps need no shift. Checked only for CPU inference outside autocast (whose low-precision logits keep the
        shift): reading the bound would wait for another device, and while compiling or tracing the value-dependent
        choice would be baked in."""
        if x.device.type != "cpu" or autocast_on(x) or _compiling() or torch.jit.is_tracing():
            return False
        bound = float(torch.linalg.vector_norm(x, dim=-1).amax()) * float(torch.linalg.vector_norm(wa, dim=1).amax())
        return bound <= self.exp_limit(x.shape[1])

    def _token_softmax(self, x, wa, fast, shift=True):
        """Pass 1 of ``_infer``, per token block of ``x``: the logits ``x Wa^T`` (B, t, 4h*S), exponentiated against the
        block's max over its tokens (a constant shift that softmax ignores), or unshifted where ``shift`` is False
        (``_logits_bounded``); then the factor that
        turns each block's exps into the softmax over all N tokens (exp(max_b - max) / the sum over blocks).

        Returns:
            ``(exps, scales)``, one per block.
        """
        exps, maxes, sums = [], [], []
        T = self.token_block(x)
        if not shift:  # every logit is within +-exp_limit: exp(z) itself, one sum over all blocks
            for i in range(0, x.shape[1], T):
                e = linear(x[:, i:i + T], wa, None, fast).exp_()
                exps.append(e)
                sums.append(e.sum(dim=1, keepdim=True))
            return exps, [1.0 / sum(sums)] * len(exps)
        for i in range(0, x.shape[1], T):
            z = linear(x[:, i:i + T], wa, None, fast)  # (B, t, 4h*S)
            if autocast_on(x):
                z = z.float()  # the softmax over tokens in float32, as autocast runs softmax
            zmax = z.amax(dim=1, keepdim=True)  # (B, 1, 4h*S)
            e = z.sub_(zmax).exp_()  # in place: z is this block's own fresh product
            exps.append(e)
            maxes.append(zmax)
            sums.append(e.sum(dim=1, keepdim=True))
        if len(exps) == 1:
            return exps, [1.0 / sums[0]]
        maxes = torch.stack(maxes)  # (blocks, B, 1, 4h*S)
        w = (maxes - maxes.amax(dim=0)).exp()
        return exps, (w / (torch.stack(sums) * w).sum(dim=0)).unbind(0)

    def _infer(self, x, wa, wb, bb, fast, shift=True):
        """``forward`` without autograd, pass 2 in place. The logits' bias ``ba`` is left out: it is the same for
        every token of a (head, slot) column, and the softmax over tokens cancels it (exactly, in real arithmetic;
        autograd keeps it, so that ``trans_dims.bias`` and ``linear_0.bias`` still get their (zero) gradients and
        weight decay as before). Eval mode only: the dropouts are the identity."""
        B, N, _ = x.shape
        H, S, T = self.num_heads, self.linear_0.out_features, self.token_block(x)
        exps, scales = self._token_softmax(x, wa, fast, shift)
        out = x.new_empty(B, N, bb.shape[0])
        for i, e, scale in zip(range(0, N, T), exps, scales):
            attn = e.mul_(scale).view(B, -1, H, S)  # softmax over tokens
            attn.div_(attn.sum(dim=-1, keepdim=True).add_(1e-9))  # l1 over memory slots
            linear_into(out[:, i:i + T], attn.view(B, -1, H * S), wb, bb, fast)
        return out

    def forward_reference(self, x):
        """The step-by-step form (same result as ``forward``): trans_dims, M_k, double normalisation, M_v, proj."""
        B, N, _ = x.shape
        x = self.trans_dims(x).view(B, N, self.num_heads, -1).transpose(1, 2)  # (B, 4h, N, d)
        attn = self.linear_0(x).softmax(dim=-2)  # (B, 4h, N, S), softmax over tokens
        attn = attn / (attn.sum(dim=-1, keepdim=True) + 1e-9)  # l1 over memory slots
        attn = self.attn_drop(attn)
        x = self.linear_1(attn).transpose(1, 2).reshape(B, N, -1)  # (B, N, 4C)
        return self.proj_drop(self.proj(x))
