"""Point-cloud transforms (dict in, dict out), registered in mmengine's ``TRANSFORMS``.

Training follows PCT (Guo et al., 2021; official data code after DGCNN): random point dropout (PointNet++:
a ratio drawn in [0, 0.875), dropped points replaced by the first point), per-axis scale in [2/3, 3/2] and shift
in [-0.2, 0.2], shuffle. Evaluation takes the first ``num_points`` points, one pass.

A sample holds ``points`` (N, D) and per-point ``seg`` (N,) when segmenting; every transform keeps them aligned.
"""
import numpy as np
import torch
from mmengine.registry import TRANSFORMS


def _take(results, idx):
    results["points"] = results["points"][idx]
    if "seg" in results:
        results["seg"] = results["seg"][idx]
    return results


@TRANSFORMS.register_module()
class PointSample:
    """Keep ``num_points`` points: the first ones (``mode='first'``, evaluation) or a random subset
    (``mode='random'``, without replacement when possible). Clouds with fewer points repeat them cyclically
    (``first``) or draw with replacement (``random``).
    """

    def __init__(self, num_points=1024, mode="first"):
        if mode not in ("first", "random"):
            raise ValueError(f"PointSample: mode must be 'first' or 'random', got {mode!r}")
        self.num_points, self.mode = num_points, mode

    def __call__(self, results):
        n = len(results["points"])
        if n == 0:
            raise ValueError("PointSample: the cloud has no points")
        if self.mode == "first":
            idx = np.arange(self.num_points) % n
        else:
            idx = np.random.choice(n, self.num_points, replace=n < self.num_points)
        return _take(results, idx)


@TRANSFORMS.register_module()
class PointDropout:
    """PointNet++ random point dropout: drop a random fraction in [0, max_ratio) of the points by replacing
    them (and their part labels) with the first point, keeping N fixed."""

    def __init__(self, max_ratio=0.875):
        self.max_ratio = max_ratio

    def __call__(self, results):
        n = len(results["points"])
        ratio = np.random.random() * self.max_ratio
        drop = np.where(np.random.random(n) <= ratio)[0]
        if drop.size:
            idx = np.arange(n)
            idx[drop] = 0
            results = _take(results, idx)
        return results


@TRANSFORMS.register_module()
class PointScaleShift:
    """PCT's ``translate_pointcloud``: xyz * s + t, s ~ U(scale)^3 per axis, t ~ U(-shift, shift)^3. Normals
    (columns 3:6) follow the anisotropic scale (n / s, renormalised)."""

    def __init__(self, scale=(2.0 / 3.0, 1.5), shift=0.2):
        self.scale, self.shift = scale, shift

    def __call__(self, results):
        pts = results["points"].copy()
        s = np.random.uniform(self.scale[0], self.scale[1], size=3).astype(np.float32)
        t = np.random.uniform(-self.shift, self.shift, size=3).astype(np.float32)
        pts[:, :3] = pts[:, :3] * s + t
        if pts.shape[1] >= 6:
            n = pts[:, 3:6] / s
            pts[:, 3:6] = n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
        results["points"] = pts
        return results


@TRANSFORMS.register_module()
class PointShuffle:
    """Random permutation of the points (and their labels)."""

    def __call__(self, results):
        return _take(results, np.random.permutation(len(results["points"])))


@TRANSFORMS.register_module()
class PackPointInputs:
    """-> ``dict(inputs=(N, D) float tensor, data_samples=dict(label | seg, category))`` for ``default_collate``."""

    def __call__(self, results):
        samples = {}
        if "label" in results:
            samples["label"] = torch.tensor(results["label"], dtype=torch.long)
        if "seg" in results:
            samples["seg"] = torch.as_tensor(np.ascontiguousarray(results["seg"]), dtype=torch.long)
            samples["category"] = torch.tensor(results["category"], dtype=torch.long)
        points = torch.as_tensor(np.ascontiguousarray(results["points"]), dtype=torch.float32)
        return dict(inputs=points, data_samples=samples)
