"""CPU/GPU inference of mmseg's ``SegformerHead`` with its fusion conv moved before the resize.

``SegformerHead.forward`` maps each of the L input levels to ``channels`` with a 1x1 ConvModule, resizes every map
to the first level's size, concatenates them (L x channels) and fuses them with a 1x1 ConvModule (conv, BN, ReLU)::

    out = act(BN(W [resize(y_1); ...; resize(y_L)]))      W = [W_1 ... W_L], each (channels x channels)

A 1x1 conv mixes channels per pixel and a resize (bilinear or any ``F.interpolate`` mode) mixes pixels per channel,
so the two commute: ``W_i resize(y_i) = resize(W_i y_i)``. In eval the BN is an affine map per channel that folds
into ``W``. ``fused_forward`` therefore runs each level's slice of the fusion conv at that level's own resolution,
resizes the (channels-wide) products and sums them, and never builds the (L x channels) concatenation at the
largest resolution: at 2048 px (levels at strides 8..64) the fusion conv's work drops to 1/3 and the 134 MB
concatenation disappears. Same values to float rounding (``tests/test_seg.py`` checks logits and labels against
``SegformerHead.forward``).

It runs only where nothing can notice: eval mode, no autograd, a plain ``SegformerHead`` whose fusion ConvModule is
(conv 1x1 without groups, BatchNorm in eval with running statistics or no norm, any activation) in that order, and
no hooks on the fusion modules. Otherwise ``head.forward`` runs as in mmseg.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from ..layers.linear import unhooked

__all__ = ["can_fuse", "fused_forward", "head_forward"]


def can_fuse(head):
    """True when ``fused_forward(head, inputs)`` computes what ``head.forward(inputs)`` does (see the module doc)."""
    from . import _mmcv_compat
    _mmcv_compat.install()  # before mmseg, as zoo.heads.seg does (idempotent)
    from mmseg.models.decode_heads import SegformerHead
    if type(head) is not SegformerHead or head.training or torch.is_grad_enabled():
        return False
    fc = head.fusion_conv
    conv = fc.conv
    if tuple(fc.order) != ("conv", "norm", "act") or type(conv) is not nn.Conv2d or conv.kernel_size != (1, 1) \
            or conv.groups != 1 or conv.stride != (1, 1) or conv.padding != (0, 0):
        return False
    norm = fc.norm if fc.with_norm else None
    if norm is not None and not (isinstance(norm, nn.modules.batchnorm._BatchNorm) and not norm.training
                                 and norm.track_running_stats and norm.running_mean is not None):
        return False
    extra = ([norm] if norm is not None else []) + ([fc.activate] if fc.with_activation else [])
    return unhooked(head, fc, conv, *extra)


def _folded(fc):
    """The fusion conv with its eval BN folded in: ``(W (out, in), b (out,))``."""
    w = fc.conv.weight.flatten(1)
    b = fc.conv.bias
    if fc.with_norm:
        bn = fc.norm
        scale = bn.running_var.add(bn.eps).rsqrt()
        if bn.weight is not None:
            scale = scale * bn.weight
        shift = -bn.running_mean * scale + (bn.bias if bn.bias is not None else 0)
        b = shift if b is None else b * scale + shift
        w = w * scale[:, None]
    return w, b


def fused_forward(head, inputs):
    """``head.forward(inputs)`` with the fusion conv run per level before the resize (check ``can_fuse`` first)."""
    inputs = head._transform_inputs(inputs)
    w, b = _folded(head.fusion_conv)
    ch = head.channels
    size = inputs[0].shape[2:]
    out = None
    for i, x in enumerate(inputs):
        z = F.conv2d(head.convs[i](x), w[:, i * ch:(i + 1) * ch, None, None], b if i == 0 else None)
        if z.shape[2:] != size:
            z = F.interpolate(z, size=size, mode=head.interpolate_mode, align_corners=head.align_corners)
        out = z if out is None else out.add_(z)
    if head.fusion_conv.with_activation:
        out = head.fusion_conv.activate(out)
    return head.cls_seg(out)


def head_forward(head, inputs):
    """The decode head's logits: ``fused_forward`` where ``can_fuse``, else ``head.forward``."""
    return fused_forward(head, inputs) if can_fuse(head) else head.forward(inputs)
