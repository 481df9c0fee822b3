"""Linear layers through oneDNN for CPU inference.

On these CPUs oneDNN's fused linear (the kernel ``torch.compile`` uses on CPU) runs the ViT's GEMMs about 10% faster
than ``F.linear`` (MKL ``addmm``, which first copies the bias into the output), and fuses the exact GELU of the MLP.
The result is the same linear map (float32 rounding aside). It is used only where nothing can notice the bypass of
``nn.Linear.__call__``: no autograd (``no_grad`` / ``inference_mode``), float32 CPU tensors outside autocast and
outside ``torch.compile`` tracing, and plain ``nn.Linear`` modules without hooks (a wrapped or hooked layer, e.g. a
LoRA adapter or a feature-extraction hook, always runs through its own ``forward``).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    _ONEDNN_LINEAR = torch.ops.mkldnn._linear_pointwise
except (AttributeError, RuntimeError):  # a torch build without oneDNN
    _ONEDNN_LINEAR = None


def _compiling():
    return hasattr(torch, "compiler") and torch.compiler.is_compiling()


def plain(*modules):
    """True when each module is exactly ``nn.Linear`` / ``nn.GELU`` (not a subclass or wrapper) and has no hooks, so
    calling the functional form on its parameters is indistinguishable from calling the module."""
    return all(type(m) in (nn.Linear, nn.GELU) and not (m._forward_hooks or m._forward_pre_hooks) for m in modules)


def onednn_ready(x, *modules):
    """True when ``x`` can go through oneDNN's linear for each of ``modules`` without changing what anyone observes."""
    if _ONEDNN_LINEAR is None or torch.is_grad_enabled() or x.device.type != "cpu" or x.dtype != torch.float32:
        return False
    if torch.is_autocast_enabled("cpu") or _compiling() or not torch.backends.mkldnn.is_available():
        return False
    return plain(*modules)


def linear(x, weight, bias=None, fast=False):
    """``F.linear``, or oneDNN's linear when ``fast`` (the caller checked ``onednn_ready``)."""
    return onednn_linear(x, weight, bias) if fast else F.linear(x, weight, bias)


def onednn_linear(x, weight, bias=None, gelu=False):
    """``x @ weight.T + bias`` (then exact GELU if ``gelu``) in one oneDNN call; check ``onednn_ready`` first."""
    if gelu:
        return _ONEDNN_LINEAR(x, weight, bias, "gelu", [], "none")  # "none": erf GELU, not the tanh approximation
    return _ONEDNN_LINEAR(x, weight, bias, "none", [], "")
