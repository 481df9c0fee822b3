"""Cross-entropies that weight pixels by where they are: where two items meet (``NeighbourWeightedCrossEntropy``)
and by the size of the region they belong to (``RegionBalancedCrossEntropy``).

On the scenes, a small visible item region named wrong takes the class of an item it touches three times as often
as chance (docs/seg_scenes_study.md, "Small regions take the name of the item they touch"). This loss raises the
weight of the item pixels that have a pixel of another item class within ``radius`` (in the label map, as the head's
loss sees it), so a probe can ask whether pressing on those pixels keeps neighbours apart (one `sa` run with boost 2,
radius 4: no change beyond seed noise, docs/seg_scenes_study.md). Set in a config as the decode head's loss::

    model.decode_head.loss_decode = dict(type='NeighbourWeightedCrossEntropy', boost=2.0, radius=1)

It is a softmax cross-entropy averaged over the labelled pixels with the weights ``1 + boost`` (near another item)
and 1 (elsewhere): with ``boost=0`` it is mmseg's ``CrossEntropyLoss(avg_non_ignore=True)``.
"""
import numpy as np
import torch
import torch.nn.functional as F
from mmseg.registry import MODELS
from scipy import ndimage


def near_other_item(labels, radius=1, background=0, ignore_index=255):
    """(B, H, W) bool: item pixels (not ``background``, not ``ignore_index``) with a pixel of another item class in
    their (2 radius + 1)^2 window. ``labels`` is (B, H, W) integer."""
    if labels.dim() != 3:
        raise ValueError(f"labels must be (B, H, W), got {tuple(labels.shape)}")
    k = 2 * radius + 1
    padded = F.pad(labels[:, None].float(), (radius,) * 4, value=float(ignore_index))
    windows = F.unfold(padded, k).view(labels.shape[0], k * k, *labels.shape[1:])  # every neighbour's label
    centre = labels[:, None].float()
    other = (windows != centre) & (windows != background) & (windows != ignore_index)
    is_item = (labels != background) & (labels != ignore_index)
    return is_item & other.any(1)


class _PixelWeightedCrossEntropy(torch.nn.Module):
    """Softmax cross-entropy, the mean over labelled pixels weighted by ``pixel_weights(label, ignore_index)``: what
    the two losses below share (mmseg's loss interface, argument checks)."""

    def __init__(self, loss_weight=1.0, loss_name="loss_ce", **kwargs):
        super().__init__()
        name = type(self).__name__
        if kwargs.pop("use_sigmoid", False) or kwargs.pop("class_weight", None) is not None:
            raise ValueError(f"{name} is a softmax loss without class weights; drop use_sigmoid / class_weight")
        kwargs.pop("avg_non_ignore", None)
        if kwargs:
            raise TypeError(f"{name} got unknown arguments {sorted(kwargs)}")
        self.loss_weight, self._loss_name = loss_weight, loss_name

    @property
    def loss_name(self):
        return self._loss_name

    def pixel_weights(self, label, ignore_index):
        raise NotImplementedError

    def forward(self, cls_score, label, weight=None, ignore_index=255, **kwargs):
        if weight is not None:
            raise ValueError(f"{type(self).__name__} makes its own pixel weights; a pixel sampler's weights cannot "
                             f"be combined with them")
        ce = F.cross_entropy(cls_score, label, ignore_index=ignore_index, reduction="none")
        w = self.pixel_weights(label, ignore_index).to(ce.dtype) * (label != ignore_index).to(ce.dtype)
        return self.loss_weight * (ce * w).sum() / w.sum().clamp_min(torch.finfo(ce.dtype).eps)


@MODELS.register_module()
class NeighbourWeightedCrossEntropy(_PixelWeightedCrossEntropy):
    """Softmax cross-entropy, mean over labelled pixels weighted ``1 + boost`` where ``near_other_item``.

    Args:
        boost: Extra weight of an item pixel next to another item (0: plain cross-entropy).
        radius: Half-width of the window, in label pixels.
        background: The background class (its pixels and neighbours never count as an item).
        loss_weight: Factor on the loss, as in mmseg's losses.
        loss_name: Key of the loss in the loss dict (must start with ``loss_``).
        **kwargs: mmseg ``CrossEntropyLoss`` keys a base config may carry; ``use_sigmoid`` must be False and
            ``class_weight`` None, and ``avg_non_ignore`` is always True here.
    """

    def __init__(self, boost=2.0, radius=1, background=0, loss_weight=1.0, loss_name="loss_ce", **kwargs):
        super().__init__(loss_weight, loss_name, **kwargs)
        if boost < 0 or radius < 1:
            raise ValueError(f"boost must be >= 0 and radius >= 1, got boost={boost}, radius={radius}")
        self.boost, self.radius, self.background = float(boost), int(radius), int(background)

    def pixel_weights(self, label, ignore_index):
        return 1 + self.boost * near_other_item(label, self.radius, self.background, ignore_index).float()

def region_sizes(labels, ignore_index=255):
    """(B, H, W) float: for each labelled pixel, the pixel count of its region (the 4-connected pixels of its class
    around it: one item, or items of one class that touch, or a patch of background); 0 on ``ignore_index``."""
    if labels.dim() != 3:
        raise ValueError(f"labels must be (B, H, W), got {tuple(labels.shape)}")
    lab = labels.detach().cpu().numpy()
    out = np.zeros(lab.shape, dtype=np.float32)
    for b in range(lab.shape[0]):
        for cls in np.unique(lab[b]):
            if cls == ignore_index:
                continue
            comp, n = ndimage.label(lab[b] == cls)  # 4-connectivity
            sizes = np.bincount(comp.ravel(), minlength=n + 1).astype(np.float32)
            mask = comp > 0
            out[b][mask] = sizes[comp[mask]]
    return torch.from_numpy(out).to(labels.device)


@MODELS.register_module()
class RegionBalancedCrossEntropy(_PixelWeightedCrossEntropy):
    """Softmax cross-entropy, mean over labelled pixels weighted ``size ** -power``, ``size`` being the pixel count of
    the pixel's region (``region_sizes``). ``power=1``: every region, a 40-pixel fragment as a 900-pixel item or the
    background, weighs the same in the loss; ``power=0``: mmseg's ``CrossEntropyLoss(avg_non_ignore=True)``.

    A probe of whether the scenes segmentors misname the small, partly hidden items because plain cross-entropy
    weighs them by their few pixels (docs/seg_scenes_study.md, "Every region weighed alike"). Set in a config as the
    decode head's loss::

        model.decode_head.loss_decode = dict(type='RegionBalancedCrossEntropy', power=1.0)

    Args:
        power: Exponent of the region size in the pixel weights (>= 0).
        loss_weight, loss_name, **kwargs: As ``NeighbourWeightedCrossEntropy``.
    """

    def __init__(self, power=1.0, loss_weight=1.0, loss_name="loss_ce", **kwargs):
        super().__init__(loss_weight, loss_name, **kwargs)
        if power < 0:
            raise ValueError(f"power must be >= 0, got {power}")
        self.power = float(power)

    def pixel_weights(self, label, ignore_index):
        # ignored pixels (size 0) get weight 1 here, and 0 from the caller's mask
        return region_sizes(label, ignore_index).clamp_min(1) ** -self.power
