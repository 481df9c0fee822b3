"""``tasks.seg.region_probe``: features pooled over each item's visible pixels, and the linear read-outs of them."""
import os
import sys

import numpy as np
import pytest

from tasks.seg import oracle, region_probe
from zoo.datasets import FASHION_MNIST_ROOT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")


def _make_scenes(folder, num_train, num_val):
    """Scenes of ``make_scenes.py --seed 3`` under ``folder``, ADE20K layout."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    make_scenes(folder, seed=3, num_train=num_train, num_val=num_val, size=64)


def test_by_size_counts_each_bin_by_hand():
    right = np.array([1, 0, 1, 1, 0])
    pixels = np.array([20, 149, 150, 399, 400])
    out = region_probe.by_size(right, pixels)
    assert out == {"all": 60.0, "<150": 50.0, "150-400": 100.0, ">=400": 0.0}


def test_linear_probe_separates_separable_classes():
    import torch
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0]])
    y = torch.arange(3).repeat(40)
    x = centres[y] + torch.randn(120, 3, generator=g)
    fit, pred = region_probe.linear_probe(x[:90], y[:90].numpy(), x[90:], num_classes=3)
    assert (fit == y[:90].numpy()).all() and (pred == y[90:].numpy()).all()


def test_pooled_logits_are_the_segmentors_logits_averaged_over_each_item(tmp_path, one_thread):
    import torch
    from PIL import Image

    import zoo
    _make_scenes(tmp_path, num_train=3, num_val=2)
    model = zoo.load("sa_vit_micro.seg_scenes").eval()
    paths, _, scenes = oracle.replay_written(str(tmp_path), "validation", seed=3)
    feats, classes, pixels = region_probe.pooled(model, paths, scenes, min_pixels=20)
    kept = [it for items in scenes for it in items if it.visible.sum() >= 20]
    assert len(classes) == len(kept) and list(classes) == [it.cls for it in kept]
    assert list(pixels) == [int(it.visible.sum()) for it in kept]
    assert feats["trunk"].shape[1] == 64 and feats["trunk_all"].shape[1] == 4 * 64 and feats["logits"].shape[1] == 11
    # by hand: the segmentor's own full-size logits (its forward), averaged over each item's visible pixels
    with torch.no_grad():
        logits = model(zoo.preprocess([Image.open(p) for p in paths], model))
    n = 0
    for s, items in enumerate(scenes):
        for it in items:
            if it.visible.sum() < 20:
                continue
            expected = logits[s][:, torch.from_numpy(it.visible)].mean(1)
            torch.testing.assert_close(feats["logits"][n], expected, rtol=1e-4, atol=1e-4)
            n += 1
    # another seed's scenes are refused rather than paired with the wrong items
    with pytest.raises(ValueError, match="make scenes"):
        oracle.replay_written(str(tmp_path), "validation", seed=4)
    with pytest.raises(ValueError, match="fewer than"):
        oracle.replay_written(str(tmp_path), "training", seed=3, num=5)


def test_analyse_runs_end_to_end_and_trunk_from_swaps_in_the_classifiers_trunk(tmp_path, one_thread):
    import torch

    import zoo
    _make_scenes(tmp_path, num_train=4, num_val=2)
    out = region_probe.analyse("ea_vit_micro.seg_scenes", str(tmp_path), train_scenes=4, seed=3)
    _, _, scenes = oracle.replay_written(str(tmp_path), "training", seed=3, num=4)
    assert out["train_items"] == sum(it.visible.sum() >= 20 for items in scenes for it in items)
    assert set(out) == {"train_items", "val_items", "segmentor_vote"} | {f"linear_{k}" for k in region_probe.MAPS}
    assert all(0 <= v["val"]["all"] <= 100 for k, v in out.items() if k not in ("train_items", "val_items"))
    swapped = region_probe.load("ea_vit_micro.seg_scenes", trunk_from="ea_vit_micro.cls_fmnist")
    own = region_probe.load("ea_vit_micro.seg_scenes")
    classifier = zoo.load("ea_vit_micro.cls_fmnist")
    w = "blocks.2.mlp.fc1.weight"
    torch.testing.assert_close(swapped.backbone.trunk.state_dict()[w], classifier.state_dict()[w])
    assert not torch.equal(own.backbone.trunk.state_dict()[w], classifier.state_dict()[w])
