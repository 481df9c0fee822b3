"""A decode head's training loss without the full-resolution logits (``zoo.layers.resize_cross_entropy``).

mmseg's ``BaseDecodeHead.loss`` resizes the head's logits to the label size and runs its ``CrossEntropyLoss`` and
``accuracy`` on them. ``head_loss`` returns the same dict (``loss_ce``, ``acc_seg``, the same reduction, loss
weight, ``avg_non_ignore`` and ``ignore_index``) from ``resize_cross_entropy``, which holds one band of resized
rows at a time. It applies where that is exactly what mmseg computes: the head's ``loss`` and ``loss_by_feat`` are
``BaseDecodeHead``'s, there is no pixel sampler, and every loss is a softmax ``CrossEntropyLoss`` with mean reduction
and no class weights. Any other head runs its own ``loss``.
"""
import torch
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.losses import CrossEntropyLoss

from ..layers.resize_loss import resize_cross_entropy

_EPS = torch.finfo(torch.float32).eps  # mmseg's guard against dividing by zero, in the loss and in the accuracy


def _losses(head):
    return list(head.loss_decode) if isinstance(head.loss_decode, torch.nn.ModuleList) else [head.loss_decode]


def low_memory_applies(head):
    """Whether ``head_loss`` computes exactly what ``head.loss`` does (see the module docstring)."""
    cls = type(head)
    if cls.loss is not BaseDecodeHead.loss or cls.loss_by_feat is not BaseDecodeHead.loss_by_feat:
        return False
    if getattr(head, "sampler", None) is not None or head.out_channels != head.num_classes:
        return False
    return all(type(ce) is CrossEntropyLoss and not ce.use_sigmoid and not ce.use_mask and ce.class_weight is None
               and ce.reduction == "mean" for ce in _losses(head))


def head_loss(head, inputs, data_samples, train_cfg, low_memory=True):
    """``head.loss(inputs, data_samples, train_cfg)``, through ``resize_cross_entropy`` where it applies."""
    if not (low_memory and low_memory_applies(head)):
        return head.loss(inputs, data_samples, train_cfg)
    logits = head.forward(inputs)
    labels = head._stack_batch_gt(data_samples).squeeze(1)  # (B, H, W)
    total, correct = resize_cross_entropy(logits.float(), labels, align_corners=head.align_corners,
                                          ignore_index=head.ignore_index)
    n_valid = int((labels != head.ignore_index).sum())
    out = {}
    for ce in _losses(head):
        avg = n_valid if ce.avg_non_ignore else labels.numel()
        loss = ce.loss_weight * (total / (avg + _EPS))
        out[ce.loss_name] = out[ce.loss_name] + loss if ce.loss_name in out else loss
    out["acc_seg"] = (correct.float().reshape(1) + _EPS) * (100.0 / (n_valid + _EPS))
    return out
