"""Point-cloud metrics, registered in mmengine's ``METRICS``.

- ``PointClsMetric``: overall accuracy (OA) and mean per-class accuracy (mAcc, the mean recall over the classes
  present in the labels), in percent.
- ``PartIoUMetric``: ShapeNetPart mIoU (PointNet protocol): predictions are restricted to the parts of the
  shape's category (argmax over those logits only); for each part of the category IoU = |P & G| / |P | G|, and a
  part absent from both prediction and label counts IoU 1; a shape's IoU is the mean over its category's parts.
  Instance mIoU averages shapes; class mIoU averages the per-category means (categories present). In percent.
"""
import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.registry import METRICS

from zoo.datasets import SHAPENET_CATEGORIES, SHAPENET_PARTS


def accuracy_scores(preds, labels, num_classes=None):
    """OA and mAcc (fractions) of integer predictions against labels."""
    preds, labels = np.asarray(preds), np.asarray(labels)
    oa = float((preds == labels).mean())
    classes = np.unique(labels)
    macc = float(np.mean([(preds[labels == c] == c).mean() for c in classes]))
    return oa, macc


def shape_iou(pred, gt, parts):
    """Mean IoU of one shape over its category's ``parts`` (a part absent from both counts 1)."""
    pred, gt = np.asarray(pred)[:, None], np.asarray(gt)[:, None]
    parts = np.asarray(parts)[None]
    inter = ((pred == parts) & (gt == parts)).sum(0)
    union = ((pred == parts) | (gt == parts)).sum(0)
    iou = np.where(union == 0, 1.0, inter / np.maximum(union, 1))
    return float(iou.mean())


def restrict_argmax(logits, parts):
    """Argmax of per-point ``logits`` (N, P) over the columns ``parts`` only, as global part ids."""
    parts = np.asarray(parts)
    return parts[np.asarray(logits)[:, parts].argmax(axis=1)]


@METRICS.register_module()
class PointClsMetric(BaseMetric):
    """OA and mAcc of a point-cloud classifier (samples carry ``pred`` and ``label``)."""

    default_prefix = ""

    def process(self, data_batch, data_samples):
        for s in data_samples:
            self.results.append((int(s["pred"]), int(s["label"])))

    def compute_metrics(self, results):
        preds, labels = zip(*results)
        oa, macc = accuracy_scores(preds, labels)
        return dict(OA=100.0 * oa, mAcc=100.0 * macc)


@METRICS.register_module()
class PartIoUMetric(BaseMetric):
    """Instance and class mIoU of a part segmenter (samples carry ``seg_logits`` (N, P), ``seg`` (N,),
    ``category``). Category parts come from the dataset's ``metainfo['parts']`` or the ShapeNetPart table."""

    default_prefix = ""

    def __init__(self, parts=None, **kwargs):
        super().__init__(**kwargs)
        self._parts = parts

    @property
    def parts(self):
        if self._parts is not None:
            return self._parts
        meta = self.dataset_meta or {}
        return meta.get("parts") or tuple(tuple(SHAPENET_PARTS[c]) for c in SHAPENET_CATEGORIES)

    def process(self, data_batch, data_samples):
        for s in data_samples:
            cat = int(s["category"])
            parts = self.parts[cat]
            logits = s["seg_logits"]
            logits = logits.float().cpu().numpy() if hasattr(logits, "cpu") else np.asarray(logits)
            gt = s["seg"].cpu().numpy() if hasattr(s["seg"], "cpu") else np.asarray(s["seg"])
            self.results.append((cat, shape_iou(restrict_argmax(logits, parts), gt, parts)))

    def compute_metrics(self, results):
        cats = np.array([c for c, _ in results])
        ious = np.array([v for _, v in results])
        class_miou = np.mean([ious[cats == c].mean() for c in np.unique(cats)])
        return dict(instance_mIoU=100.0 * float(ious.mean()), class_mIoU=100.0 * float(class_miou))
