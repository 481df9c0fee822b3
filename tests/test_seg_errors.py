"""``tasks.seg.errors``: the error breakdown of a scenes segmentor, against counts done by hand and mmseg's
``IoUMetric``, and on a bundled checkpoint against its card."""
import os

import numpy as np
import pytest
import torch

from tasks.seg import errors

# Two images, classes 0 (background), 1, 2. Image A: a class-1 item top right, a class-2 item bottom left.
GT_A = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 0, 0], [2, 2, 0, 0]])
PRED_A = np.array([[0, 0, 1, 2], [0, 1, 1, 1], [2, 1, 0, 0], [0, 2, 0, 0]])
# the best item class per pixel (background left out): class 1's region votes 1,2,1,1 (right), class 2's votes
# 2,1,1,2 (a tie, which goes to the lower class 1: wrong)
ITEMS_A = np.array([[1, 1, 1, 2], [1, 1, 1, 1], [2, 1, 1, 1], [1, 2, 1, 1]])
# The class-2 item touches the class-1 item diagonally ((1, 2) and (2, 1)), so its wrong name is a touching item's.
# Image B: two separate class-1 regions of one pixel each, one named right, one wrong (as class 2, which no pixel
# next to it has); background right.
GT_B = np.array([[1, 0, 1]])
PRED_B = np.array([[1, 0, 2]])
ITEMS_B = np.array([[1, 1, 2]])


def test_the_breakdown_matches_counts_by_hand():
    conf = errors.confusion([GT_A, GT_B], [PRED_A, PRED_B], 3)
    # by hand: A's background row 7 right + 1 as class 1, B adds 1 right; class 1: A 3 right + 1 as 2, B 1 right +
    # 1 as 2; class 2: A 2 right, 1 as background, 1 as class 1
    assert conf.tolist() == [[8, 1, 0], [0, 4, 2], [1, 1, 2]]
    votes = errors.item_votes([GT_A, GT_B], [ITEMS_A, ITEMS_B], 3, min_pixels=1)
    assert sorted(votes) == [(1, 0, 0, 0.0), (1, 1, 0, 0.0), (4, 0, 1, 1.0), (4, 1, 0, 0.0)]
    out = errors.breakdown(conf, votes)
    # IoU: background 8 / (9 + 9 - 8), class 1 4 / (6 + 6 - 4), class 2 2 / (4 + 4 - 2)
    assert out["iou"] == pytest.approx([80.0, 50.0, 100 / 3])
    assert out["mIoU"] == pytest.approx((80 + 50 + 100 / 3) / 3)
    # item vs background: 10 item pixels, 1 background pixel called an item; 9 item pixels called items
    assert out["fg_iou"] == pytest.approx(100 * 9 / 11)
    assert out["item_pixels_as_background"] == pytest.approx(10.0)
    assert out["item_pixels_right"] == pytest.approx(60.0)
    assert out["item_pixels_as_other_item"] == pytest.approx(30.0)
    assert out["items"] == 4 and out["items_majority_right"] == pytest.approx(50.0)
    assert out["items_named_as_touching_item"] == pytest.approx(25.0)
    assert out["by_size"]["<150"] == dict(items=4, majority_right=pytest.approx(50.0),
                                          named_as_touching_item=pytest.approx(25.0),
                                          named_as_touching_item_by_chance=pytest.approx(25.0))
    assert out["by_size"][">=400"]["items"] == 0
    # min_pixels drops the one-pixel regions
    assert [v[:3] for v in sorted(errors.item_votes([GT_A, GT_B], [ITEMS_A, ITEMS_B], 3, min_pixels=2))] == \
        [(4, 0, 1), (4, 1, 0)]


def test_a_wrong_name_is_checked_against_the_items_it_touches_and_against_chance():
    # Five classes: items 1 (2x2), 2 (a column of 2) and 4 (a row of 2 below them); each touches the other two
    # (8-connected), so a wrong name drawn at random from the 3 other item classes hits a touching one with 2/3.
    gt = np.array([[1, 1, 2, 0], [1, 1, 2, 0], [0, 4, 4, 0]])
    # item 1 named 3 (wrong, touches no 3), item 2 named 2 (right), item 4 named 2 (wrong, the item it touches)
    named = np.array([[3, 3, 2, 1], [3, 3, 2, 1], [1, 2, 2, 1]])
    votes = sorted(errors.item_votes([gt], [named], 5, min_pixels=1))
    assert votes == [(2, 0, 1, pytest.approx(2 / 3)), (2, 1, 0, 0.0), (4, 0, 0, pytest.approx(2 / 3))]
    out = errors.breakdown(errors.confusion([gt], [named], 5), votes)
    assert out["items_named_as_touching_item"] == pytest.approx(100 / 3)
    assert out["items_named_as_touching_item_by_chance"] == pytest.approx(100 * (4 / 3) / 3)


def test_the_miou_is_mmsegs():
    from zoo.heads import _mmcv_compat
    _mmcv_compat.install()
    from mmseg.evaluation import IoUMetric
    rng = np.random.default_rng(0)
    gts = [rng.integers(0, 4, (8, 9)) for _ in range(3)]
    preds = [np.where(rng.random(g.shape) < 0.6, g, rng.integers(0, 4, g.shape)) for g in gts]
    metric = IoUMetric(iou_metrics=["mIoU"])
    metric.dataset_meta = dict(classes=["a", "b", "c", "d"])
    metric.process([], [dict(pred_sem_seg=dict(data=torch.from_numpy(p)[None]),
                             gt_sem_seg=dict(data=torch.from_numpy(g)[None])) for g, p in zip(gts, preds)])
    ref = metric.compute_metrics(metric.results)
    ours = errors.breakdown(errors.confusion(gts, preds, 4), [])
    assert ours["mIoU"] == pytest.approx(ref["mIoU"], abs=0.005)  # IoUMetric rounds to 2 decimals


def test_a_bundled_segmentor_breaks_down_to_its_card(one_thread):
    from zoo import pretrained
    card = pretrained.read_index()["sa_vit_micro.seg_scenes"].metrics
    out = errors.analyse("sa_vit_micro.seg_scenes")
    assert out["mIoU"] == pytest.approx(card["mIoU"], abs=0.005)
    assert out["item_pixels_as_background"] + out["item_pixels_right"] + out["item_pixels_as_other_item"] == \
        pytest.approx(100.0)


def test_read_split_reads_a_slice_of_the_ade20k_layout(tmp_path):
    from PIL import Image
    for k in range(5):
        for sub, ext, val in (("images", "jpg", 0), ("annotations", "png", k)):
            os.makedirs(tmp_path / sub / "training", exist_ok=True)
            Image.fromarray(np.full((2, 3), val, np.uint8)).save(tmp_path / sub / "training" / f"s{k}.{ext}")
    paths, gts = errors.read_split(str(tmp_path), "training", num=2, first=2)
    assert [os.path.basename(p) for p in paths] == ["s2.jpg", "s3.jpg"]
    assert [int(g[0, 0]) for g in gts] == [2, 3] and gts[0].shape == (2, 3)
    assert [int(g[0, 0]) for g in errors.read_split(str(tmp_path), "training", first=3)[1]] == [3, 4]
    with pytest.raises(ValueError, match="has 5 scenes .* fewer than the 6 asked for \\(scenes 4-5\\)"):
        errors.read_split(str(tmp_path), "training", num=2, first=4)
