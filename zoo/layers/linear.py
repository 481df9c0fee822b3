"""Linear layers through oneDNN for CPU inference, on the CPUs where that measured faster.

oneDNN's fused linear (the kernel ``torch.compile`` uses on CPU) computes the same linear map as ``F.linear`` (MKL
``addmm``, which first copies the bias into the output; float32 rounding aside) and fuses the exact GELU of the MLP.
Whether it is faster depends on the CPU (``tools/benchmark.py --only linear``, one process, interleaved rounds,
torch 2.13.0+cpu; docs/BENCHMARKS.md): on an AVX-512 AMD EPYC (Zen 4) ``F.linear`` took 1.25x (``sa_vit_small``) and
1.14x (``sa_vit_base``) oneDNN's time at batch 8, 224 px; on an AVX2-only AMD EPYC it took 0.87x / 0.89x, i.e. oneDNN
was slower. So it is on by default only where torch's CPU capability is AVX512; ``ZOO_ONEDNN_LINEAR=1`` / ``0``
forces it on or off.

It is used only where nothing can notice the bypass of ``nn.Linear.__call__``: no autograd (``no_grad`` /
``inference_mode``), float32 CPU tensors outside autocast and outside ``torch.compile`` tracing, and plain
``nn.Linear`` modules without hooks (a wrapped or hooked layer, e.g. a LoRA adapter or a feature-extraction hook,
always runs through its own ``forward``).
"""
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    ONEDNN_OP = torch.ops.mkldnn._linear_pointwise  # what this torch build has (None: no oneDNN)
except (AttributeError, RuntimeError):
    ONEDNN_OP = None
# CPU capabilities (torch.backends.cpu.get_cpu_capability()) on which the op measured faster than F.linear.
FASTER_ON = ("AVX512",)


def default_enabled(capability=None, env=None):
    """``(on, why)``: whether CPU inference uses oneDNN's linear by default here, and the reason in words."""
    env = os.environ.get("ZOO_ONEDNN_LINEAR") if env is None else env
    if env is not None and env.strip() != "":
        on = env.strip().lower() not in ("0", "false", "no", "off")
        return on, f"ZOO_ONEDNN_LINEAR={env.strip()}"
    capability = capability or torch.backends.cpu.get_cpu_capability()
    if capability in FASTER_ON:
        return True, f"CPU capability {capability}: oneDNN's linear measured faster than F.linear"
    return False, f"CPU capability {capability}: oneDNN's linear measured slower than F.linear (AVX2 EPYC)"


# The op the layers use (None: F.linear). Set once at import from the CPU; tools/benchmark.py switches it.
_ONEDNN_LINEAR = ONEDNN_OP if ONEDNN_OP is not None and default_enabled()[0] else None


def _compiling():
    return hasattr(torch, "compiler") and torch.compiler.is_compiling()


def unhooked(*modules):
    """True when no module has a forward (pre-)hook, so computing its output without calling it goes unnoticed."""
    return all(not (m._forward_hooks or m._forward_pre_hooks) for m in modules)


def plain(*modules):
    """True when each module is exactly ``nn.Linear`` / ``nn.GELU`` (not a subclass or wrapper) and has no hooks, so
    calling the functional form on its parameters is indistinguishable from calling the module."""
    return all(type(m) in (nn.Linear, nn.GELU) for m in modules) and unhooked(*modules)


def onednn_ready(x, *modules):
    """True when ``x`` can go through oneDNN's linear for each of ``modules`` without changing what anyone observes."""
    if _ONEDNN_LINEAR is None or torch.is_grad_enabled() or x.device.type != "cpu" or x.dtype != torch.float32:
        return False
    if torch.is_autocast_enabled("cpu") or _compiling() or not torch.backends.mkldnn.is_available():
        return False
    return plain(*modules)


def autocast_on(x):
    """True when autocast is on for ``x``'s device (False on devices autocast does not know, such as ``meta``)."""
    kind = x.device.type
    return torch.amp.is_autocast_available(kind) and torch.is_autocast_enabled(kind)


def linear(x, weight, bias=None, fast=False):
    """``F.linear``, or oneDNN's linear when ``fast`` (the caller checked ``onednn_ready``)."""
    return onednn_linear(x, weight, bias) if fast else F.linear(x, weight, bias)


def linear_into(out, x, weight, bias=None, fast=False):
    """Write ``linear(x, weight, bias, fast)`` into ``out`` (a view of a larger output, no autograd): straight from
    the GEMM where ``out`` is one contiguous matrix (``addmm(out=...)``), else through a copy. The copy also serves
    autocast (``out=`` products are not autocast: the product runs in autocast's dtype and is cast into ``out``) and
    operands of different dtypes."""
    direct = (not fast and out.is_contiguous() and x.is_contiguous() and x.dtype == weight.dtype == out.dtype
              and not autocast_on(x))
    if direct:
        rows = out.numel() // out.shape[-1]
        flat = out.view(rows, out.shape[-1])
        x2 = x.reshape(rows, x.shape[-1])
        if bias is None:
            torch.mm(x2, weight.t(), out=flat)
        else:
            torch.addmm(bias, x2, weight.t(), out=flat)
    else:
        out.copy_(linear(x, weight, bias, fast))
    return out


def onednn_linear(x, weight, bias=None, gelu=False):
    """``x @ weight.T + bias`` (then exact GELU if ``gelu``) in one oneDNN call; check ``onednn_ready`` first."""
    if gelu:
        return _ONEDNN_LINEAR(x, weight, bias, "gelu", [], "none")  # "none": erf GELU, not the tanh approximation
    return _ONEDNN_LINEAR(x, weight, bias, "none", [], "")
