"""The trivial all-background predictor on a scenes split, scored by mmseg's ``IoUMetric`` (the bar a trained
model must clear): ``python -m tasks.seg.baseline data/fashion_scenes [--split validation]``."""
import argparse
import glob
import os

import numpy as np
import torch
from PIL import Image


def all_background_scores(data_root, split="validation", num_classes=11):
    """aAcc / mIoU / mAcc (percent) of predicting class 0 everywhere, over every label map of ``split``."""
    from zoo.heads import _mmcv_compat
    _mmcv_compat.install()
    from mmseg.evaluation import IoUMetric
    metric = IoUMetric(iou_metrics=["mIoU"])
    metric.dataset_meta = dict(classes=[str(i) for i in range(num_classes)])
    paths = sorted(glob.glob(os.path.join(data_root, "annotations", split, "*.png")))
    if not paths:
        raise FileNotFoundError(f"no label maps in {os.path.join(data_root, 'annotations', split)}")
    samples = []
    for p in paths:
        gt = torch.from_numpy(np.asarray(Image.open(p), dtype=np.int64))[None]
        samples.append(dict(pred_sem_seg=dict(data=torch.zeros_like(gt)), gt_sem_seg=dict(data=gt)))
    metric.process([], samples)
    return metric.compute_metrics(metric.results)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data_root")
    p.add_argument("--split", default="validation")
    a = p.parse_args()
    print({k: float(v) for k, v in all_background_scores(a.data_root, a.split).items()})
