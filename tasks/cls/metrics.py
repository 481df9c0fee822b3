"""Top-k accuracy for image classification (the ImageNet protocol: top-1 and top-5, in percent)."""
import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.registry import METRICS


@METRICS.register_module()
class TopKAccuracy(BaseMetric):
    """Percentage of images whose label is among the ``k`` highest scores, for each ``k`` in ``topk``.

    Reads ``pred_score`` (K,) and ``gt_label`` from each prediction (``ZooClassifier`` in ``predict`` mode).
    Ties are ranked by ``torch.topk``. A ``k`` at or above the number of classes counts every image correct.
    Results are keyed ``top1``, ``top5``, ...

    Args:
        topk: The k values.
        collect_device: Where results are gathered across ranks (``cpu`` or ``gpu``).
        prefix: Optional prefix of the result keys.
    """

    default_prefix = ""  # keys stay ``top1``/``top5`` (an empty prefix also silences mmengine's "no prefix" warning)

    def __init__(self, topk=(1, 5), collect_device="cpu", prefix=None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.topk = tuple(int(k) for k in topk)
        if not self.topk or min(self.topk) < 1:
            raise ValueError(f"topk must be positive integers, got {topk}")

    def process(self, data_batch, data_samples):
        scores = torch.stack([torch.as_tensor(s["pred_score"]).float().cpu() for s in data_samples])  # (B, K)
        labels = torch.as_tensor([int(s["gt_label"]) for s in data_samples])  # (B,)
        k_max = min(max(self.topk), scores.shape[1])
        hits = scores.topk(k_max, dim=1).indices == labels[:, None]  # (B, k_max): label at rank j
        correct = torch.stack([hits[:, :min(k, k_max)].any(dim=1) for k in self.topk], dim=1)  # (B, len(topk))
        self.results.extend(correct.numpy())

    def compute_metrics(self, results):
        correct = np.stack(results).astype(np.float64)  # (N, len(topk))
        return {f"top{k}": float(100.0 * correct[:, i].mean()) for i, k in enumerate(self.topk)}
