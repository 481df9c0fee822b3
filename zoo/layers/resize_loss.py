"""Cross-entropy of bilinearly resized logits, without keeping the resized logits.

mmseg's decode heads train on ``F.cross_entropy(F.interpolate(logits, label_size, mode="bilinear"), labels)``: the
head predicts K class scores at a stride (4 or 8 pixels), and the loss upsamples them to every labelled pixel. At
2048 px and K = 150 that is 2.5 GB of resized logits per image, kept for the backward pass together with the
log-softmax autograd saves and the gradient of the same size, and it is most of a light-head segmentor's training
memory (docs/BENCHMARKS.md).

``resize_cross_entropy`` gives the same loss and the same gradient while holding one band of output rows at a
time. The resize is separable, and torch computes it along x within each source row, then along y:

- along x, ``F.interpolate`` to (h, W) keeps the source rows (1/stride of the full map, differentiable as usual);
- along y, each band of output rows is two weighted source rows (``source_index``, torch's indices and weights);
  the band's log-softmax, picked logits and argmax are reduced to sums at once, and the backward pass recomputes
  the band and scatters ``softmax - onehot`` back onto the two source rows of each output row.

The sums match mmseg's up to float rounding (the order of a few additions differs).
"""
import torch

from .resize_argmax import source_index

__all__ = ["resize_cross_entropy"]


def _band(xw, y0, y1, wy0, wy1, r0, r1):
    """Output rows r0:r1 of the resize along y: (B, K, r1 - r0, W)."""
    return (xw.index_select(2, y0[r0:r1]) * wy0[r0:r1, None] + xw.index_select(2, y1[r0:r1]) * wy1[r0:r1, None])


class _ResizeCrossEntropy(torch.autograd.Function):
    """Sum of the per-pixel cross-entropy over labelled pixels, and the number of correct argmax labels."""

    @staticmethod
    def forward(ctx, xw, labels, y0, y1, wy0, wy1, ignore_index, band):
        H = labels.shape[1]
        total = xw.new_zeros((), dtype=torch.float64)
        correct = torch.zeros((), dtype=torch.long, device=xw.device)
        for r0 in range(0, H, band):
            r1 = min(H, r0 + band)
            z = _band(xw, y0, y1, wy0, wy1, r0, r1)  # (B, K, R, W)
            lab = labels[:, r0:r1]
            valid = lab != ignore_index
            safe = lab.masked_fill(~valid, 0).unsqueeze(1)
            ce = torch.logsumexp(z, dim=1) - z.gather(1, safe).squeeze(1)
            total += ce.masked_fill(~valid, 0).sum(dtype=torch.float64)
            # max(dim).indices: argmax's labels, first maximum on ties as well (both documented), but over the
            # class axis of an NCHW band torch's argmax kernel is several times slower on a CPU
            correct += ((z.max(dim=1).indices == lab) & valid).sum()
        ctx.save_for_backward(xw, labels, y0, y1, wy0, wy1)
        ctx.ignore_index, ctx.band = ignore_index, band
        ctx.mark_non_differentiable(correct)
        return total.to(xw.dtype), correct

    @staticmethod
    def backward(ctx, grad_total, _grad_correct):
        xw, labels, y0, y1, wy0, wy1 = ctx.saved_tensors
        grad = torch.zeros_like(xw)
        H = labels.shape[1]
        for r0 in range(0, H, ctx.band):
            r1 = min(H, r0 + ctx.band)
            z = _band(xw, y0, y1, wy0, wy1, r0, r1)
            lab = labels[:, r0:r1]
            valid = lab != ctx.ignore_index
            g = torch.softmax(z, dim=1)
            g.scatter_add_(1, lab.masked_fill(~valid, 0).unsqueeze(1), -valid.unsqueeze(1).to(g.dtype))
            g.mul_((valid.to(g.dtype) * grad_total).unsqueeze(1))
            grad.index_add_(2, y0[r0:r1], g * wy0[r0:r1, None])
            grad.index_add_(2, y1[r0:r1], g * wy1[r0:r1, None])
        return grad, None, None, None, None, None, None, None


def resize_cross_entropy(logits, labels, align_corners=False, ignore_index=255, band_elems=1 << 22):
    """``F.cross_entropy(F.interpolate(logits, labels.shape[-2:], mode="bilinear", align_corners=...), labels,
    ignore_index=..., reduction="sum")`` and the argmax's correct count, holding one band of resized rows at a time.

    Args:
        logits: (B, K, h, w) class scores at the head's resolution.
        labels: (B, H, W) integer labels at the image's resolution (``ignore_index`` marks unlabelled pixels).
        align_corners: As in ``F.interpolate``.
        ignore_index: Label of pixels that take no part.
        band_elems: Resized values (B x K x rows x W) per band: the working memory of the loss.

    Returns:
        ``(loss_sum, correct)``: the summed cross-entropy over labelled pixels (differentiable in ``logits``) and the
        number of labelled pixels whose argmax of the resized logits is their label (mmseg's ``acc_seg`` count).
    """
    if logits.dim() != 4 or labels.dim() != 3 or labels.shape[0] != logits.shape[0]:
        raise ValueError(f"resize_cross_entropy takes (B, K, h, w) logits and (B, H, W) labels, got "
                         f"{tuple(logits.shape)} and {tuple(labels.shape)}")
    B, K, h, w = logits.shape
    H, W = labels.shape[1:]
    xw = logits if w == W else torch.nn.functional.interpolate(logits, size=(h, W), mode="bilinear",
                                                               align_corners=align_corners)
    y0, y1, wy0, wy1 = (t.to(logits.dtype) if t.is_floating_point() else t
                        for t in source_index(h, H, align_corners, logits.device))
    band = max(1, band_elems // max(1, B * K * W))
    return _ResizeCrossEntropy.apply(xw, labels.long(), y0, y1, wy0, wy1, ignore_index, band)
