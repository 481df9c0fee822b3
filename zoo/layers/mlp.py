"""Channel MLP and stochastic depth."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from .linear import _compiling, autocast_on, linear_into, onednn_linear, onednn_ready, plain

# CPU inference runs the MLP over blocks of CHUNK_ROWS rows, written into one output, instead of building the whole
# (tokens, 4C) hidden tensor (50 MB for the 16,384 tokens of a 2048-pixel image at width 192), where that tensor
# would take CHUNK_MIN_BYTES or more. Measured (the MLP alone, 2 threads, AVX2 EPYC, torch 2.13; one shot / blocks):
# C=192: 0.96 at 4,096 tokens (12.6 MB), 1.29-1.42 at 8,192-16,384; C=384: 1.22-1.29 at 4,096-16,384; C=768: 1.05-1.12
# at 4,096-16,384 (256-row blocks were slower there: 0.87); docs/BENCHMARKS.md ("channel MLP in row blocks").
CHUNK_ROWS = 1024
CHUNK_MIN_BYTES = 16 << 20
# Without autograd the GELU overwrites fc1's output instead of allocating a second hidden tensor. Fresh allocations of
# many MB come from the system allocator as new pages (glibc maps blocks this large and hands them back on free), and
# the page faults of one more (tokens, 4C) tensor per block cost more than the GELU itself: at 1024 px (4,097 tokens,
# C = 192, 2 threads, AVX2 EPYC) the 12 MLPs of ea_vit_tiny took 271-294 ms with a second tensor and 197-217 ms
# without (docs/BENCHMARKS.md, "The MLP's GELU in place"). tools/benchmark.py --only mlp-gelu switches it.
INPLACE_GELU = True


class Mlp(nn.Module):
    """Linear -> GELU (exact) -> Dropout -> Linear -> Dropout (timm names ``fc1``, ``fc2``)."""

    def __init__(self, in_features, hidden_features=None, out_features=None, drop=0.0):
        super().__init__()
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_features, out_features or in_features)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        rows = self.chunk_rows(x)
        if rows:
            return self._chunked(x, rows)
        return self._forward(x)

    def _forward(self, x):
        if getattr(self.act, "approximate", None) == "none" and onednn_ready(x, self.fc1, self.act, self.fc2):
            x = onednn_linear(x, self.fc1.weight, self.fc1.bias, gelu=True)  # fc1 and GELU fused (CPU inference)
            return self.drop(onednn_linear(self.drop(x), self.fc2.weight, self.fc2.bias))
        if self.gelu_in_place(x):
            return F.linear(self._hidden(x), self.fc2.weight, self.fc2.bias)
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))

    def gelu_in_place(self, x):
        """True where nothing can notice fc1's output being overwritten by the GELU: no autograd (which would keep
        it), eval mode (dropout is the identity), no autocast or ``torch.compile`` tracing (they see the modules'
        own calls), and plain ``nn.Linear`` / ``nn.GELU`` layers without hooks."""
        return (INPLACE_GELU and not torch.is_grad_enabled() and not self.training and not autocast_on(x)
                and not _compiling() and plain(self.fc1, self.act, self.fc2))

    def _hidden(self, x):
        """GELU(fc1(x)), the GELU written over fc1's fresh output (``gelu_in_place`` said so)."""
        h = F.linear(x, self.fc1.weight, self.fc1.bias)
        return torch.ops.aten.gelu_(h, approximate=self.act.approximate)

    def chunk_rows(self, x):
        """Rows per block for the blocked CPU inference path, or 0 where it does not apply: autograd on, training
        (dropout), autocast, ``torch.compile`` tracing, not a float32 CPU tensor, wrapped or hooked layers, a hidden
        tensor under ``CHUNK_MIN_BYTES``, or too few rows for two blocks."""
        if (torch.is_grad_enabled() or self.training or x.device.type != "cpu" or x.dtype != torch.float32
                or torch.is_autocast_enabled("cpu") or _compiling() or not plain(self.fc1, self.act, self.fc2)):
            return 0
        hidden, total = self.fc1.out_features, x.numel() // x.shape[-1]
        return CHUNK_ROWS if total >= 2 * CHUNK_ROWS and 4 * hidden * total >= CHUNK_MIN_BYTES else 0

    def _chunked(self, x, rows):
        """``_forward`` over blocks of ``rows`` tokens, written into one output. Each row's result depends on that
        row only, so the values are those of one shot up to float rounding (the GEMM may block a shorter matrix
        differently)."""
        flat = x.reshape(-1, x.shape[-1])
        out = flat.new_empty(flat.shape[0], self.fc2.out_features)
        # exact GELU without oneDNN: fc2 writes straight into the output; otherwise each block runs _forward
        direct = getattr(self.act, "approximate", None) == "none" and not onednn_ready(x, self.fc1, self.act, self.fc2)
        in_place = self.gelu_in_place(x)
        for i in range(0, flat.shape[0], rows):
            block = flat[i:i + rows]
            if direct:
                hidden = self._hidden(block) if in_place else F.gelu(F.linear(block, self.fc1.weight, self.fc1.bias))
                linear_into(out[i:i + rows], hidden, self.fc2.weight, self.fc2.bias)
            else:
                out[i:i + rows] = self._forward(block)
        return out.view(*x.shape[:-1], self.fc2.out_features)


class DropPath(nn.Module):
    """Stochastic depth: drop the whole residual branch per sample with probability ``p`` while training."""

    def __init__(self, p=0.0):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep

    def extra_repr(self):
        return f"p={self.p}"
