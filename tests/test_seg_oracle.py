"""``tasks.seg.oracle``: the replay of the scenes generator, and the oracle predictors against the segmentor's card."""
import os
import sys

import numpy as np
import pytest
from PIL import Image

from tasks.seg import oracle
from zoo.datasets import FASHION_MNIST_ROOT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")


def _written(tmp_path, seed=3, num_val=6):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    make_scenes(tmp_path, seed=seed, num_train=2, num_val=num_val, size=64)
    return [np.asarray(Image.open(tmp_path / "annotations" / "validation" / f"scene_{n:06d}.png"))
            for n in range(num_val)]


def test_the_replay_gives_the_written_scenes_and_each_items_visible_pixels(tmp_path):
    written = _written(tmp_path)
    maps, scenes = oracle.replay(len(written), seed=3)
    assert all(np.array_equal(m, w) for m, w in zip(maps, written))
    for label, items in zip(written, scenes):
        shown = np.zeros(label.shape, int)
        for img, cls, visible, own in items:
            assert img.shape == (28, 28) and own.shape == (28, 28) and 1 <= cls <= 10
            assert (label[visible] == cls).all()  # an item's visible pixels carry its class
            assert visible.any() == own.any()
            shown += visible
        assert shown.max() <= 1  # no pixel shows two items
        assert np.array_equal(shown > 0, label > 0)  # and every item pixel shows one
    # the other seed's scenes are not these: the analysis refuses them instead of scoring the wrong items
    with pytest.raises(ValueError, match="make scenes"):
        oracle.analyse(data_root=str(tmp_path), seed=4)


def test_the_oracles_on_the_validation_scenes_against_the_segmentors_card(one_thread):
    from zoo import pretrained
    if not os.path.isdir(os.path.join(ROOT, "data", "fashion_scenes", "annotations", "validation")):
        pytest.skip("the scenes are missing (make scenes)")
    out = oracle.analyse("sa_vit_micro.cls_fmnist", data_root=os.path.join(ROOT, "data", "fashion_scenes"),
                         segmentor="sa_vit_micro.seg_scenes")
    truth, seg = out["true class"], out["segmentor"]
    assert truth["mIoU"] == pytest.approx(100.0) and truth["items_majority_right"] == pytest.approx(100.0)
    assert seg["mIoU"] == pytest.approx(pretrained.read_index()["sa_vit_micro.seg_scenes"].metrics["mIoU"], abs=0.005)
    names_only, finding_only = out["segmentor's names, exact finding"], out["segmentor's finding, true names"]
    assert names_only["fg_iou"] == pytest.approx(100.0)
    assert names_only["items_majority_right"] == pytest.approx(seg["items_majority_right"])
    assert finding_only["fg_iou"] == pytest.approx(seg["fg_iou"]) and finding_only["items_majority_right"] == 100.0
    # each half alone scores above the whole, and the classifier-named finding votes as the classifier does
    assert names_only["mIoU"] > seg["mIoU"] and finding_only["mIoU"] > seg["mIoU"]
    cls_names = out["segmentor's finding, classifier's names"]
    assert cls_names["items_majority_right"] == pytest.approx(out["classifier, visible part"]["items_majority_right"])
    # the whole item tells the classifier more than its visible part
    whole, part = out["classifier, whole item"], out["classifier, visible part"]
    assert whole["visible_items_top1"] > part["visible_items_top1"] and whole["mIoU"] > part["mIoU"]
