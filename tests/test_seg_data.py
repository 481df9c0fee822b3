"""Segmentation data: a fake ADE20K tree through the configs' pipelines, mIoU with mmseg's IoUMetric against
hand-computed values, errors that name bad files, and the Fashion-MNIST scenes writer."""
import os

import numpy as np
import pytest
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADE_CFG = os.path.join(ROOT, "configs/seg/upernet_sa-vit-tiny_8xb2-160k_ade20k-512x512.py")
SCENES_CFG = os.path.join(ROOT, "configs/seg/upernet_sa-vit-micro_1xb16-1500_fashion-scenes-64x64.py")
FMNIST = "/usr/share/datasets/fashion-mnist"


def _write_pair(root, split, stem, label, image_size=None, ext=".jpg"):
    """One image (random RGB) + its single-channel PNG label map, in the ADE20K layout."""
    h, w = label.shape if image_size is None else image_size
    img_dir, ann_dir = os.path.join(root, "images", split), os.path.join(root, "annotations", split)
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(ann_dir, exist_ok=True)
    rgb = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(os.path.join(img_dir, stem + ext), quality=95)
    Image.fromarray(label.astype(np.uint8), mode="L").save(os.path.join(ann_dir, stem + ".png"))


def _ade_labels():
    """Two raw ADE20K label maps using 0 (unlabelled), 1, 75 and 150 (the last class)."""
    a = np.zeros((24, 32), np.uint8)
    a[:, 8:16], a[:, 16:24], a[:, 24:] = 1, 75, 150
    b = np.full((20, 30), 150, np.uint8)
    b[:5] = 0
    return {"ADE_val_00000001": a, "ADE_val_00000002": b}


def _dataset(cfg_path, data_root, split="validation", pipeline="test_pipeline"):
    import tasks.seg  # noqa: F401
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmseg.registry import DATASETS
    cfg = Config.fromfile(cfg_path)
    ds = cfg.val_dataloader.dataset.copy() if split == "validation" else cfg.train_dataloader.dataset.copy()
    ds.update(data_root=str(data_root), pipeline=cfg[pipeline])
    with DefaultScope.overwrite_default_scope("mmseg"):
        return DATASETS.build(ds)


def _iou_metric(num_classes):
    from mmseg.evaluation import IoUMetric
    metric = IoUMetric(iou_metrics=["mIoU"])
    metric.dataset_meta = dict(classes=[f"c{i}" for i in range(num_classes)])
    return metric


def _score(pairs, num_classes=150):
    import torch
    metric = _iou_metric(num_classes)
    metric.process([], [dict(pred_sem_seg=dict(data=torch.as_tensor(p)[None]),
                             gt_sem_seg=dict(data=torch.as_tensor(g)[None])) for p, g in pairs])
    return metric.compute_metrics(metric.results)


def test_ade20k_labels_reduce_zero_label(tmp_path):
    raw = _ade_labels()
    for stem, lab in raw.items():
        _write_pair(tmp_path, "validation", stem, lab)
    ds = _dataset(ADE_CFG, tmp_path)
    assert len(ds) == 2 and len(ds.metainfo["classes"]) == 150
    seen = set()
    for i, stem in enumerate(sorted(raw)):
        sample = ds[i]["data_samples"]
        gt = sample.gt_sem_seg.data[0].numpy()
        expected = np.where(raw[stem] == 0, 255, raw[stem].astype(np.int64) - 1)  # 0 -> ignore, k -> k - 1
        assert np.array_equal(gt, expected)
        assert sample.metainfo["ori_shape"] == raw[stem].shape
        seen |= set(np.unique(gt).tolist())
    assert seen == {0, 74, 149, 255}


def test_perfect_prediction_scores_100(tmp_path):
    raw = _ade_labels()
    for stem, lab in raw.items():
        _write_pair(tmp_path, "validation", stem, lab)
    ds = _dataset(ADE_CFG, tmp_path)
    gts = [ds[i]["data_samples"].gt_sem_seg.data[0] for i in range(len(ds))]
    res = _score([(g, g) for g in gts])
    assert res["mIoU"] == 100.0 and res["aAcc"] == 100.0 and res["mAcc"] == 100.0


def test_imperfect_prediction_matches_hand_computation():
    # Image A (255 = ignored pixel) and image B; intersections and unions are summed over the set, then averaged
    # over the classes present (classes absent from both prediction and label are NaN and skipped).
    gt_a, pred_a = np.array([[0, 0, 1], [1, 2, 255]]), np.array([[0, 1, 1], [1, 2, 2]])
    gt_b, pred_b = np.array([[1, 1], [1, 1]]), np.array([[0, 0], [1, 1]])
    # class 0: label 2 px, prediction 3 px (valid pixels), intersection 1 -> IoU 1 / (2 + 3 - 1) = 1/4
    # class 1: label 2 + 4 = 6, prediction 3 + 2 = 5, intersection 2 + 2 = 4 -> IoU 4 / 7
    # class 2: label 1, prediction 1 (the other "2" falls on an ignored pixel), intersection 1 -> IoU 1
    miou = (1 / 4 + 4 / 7 + 1) / 3
    aacc = (4 + 2) / (5 + 4)                 # correct / valid pixels
    macc = (1 / 2 + 4 / 6 + 1 / 1) / 3       # intersection / label pixels, per class
    res = _score([(pred_a, gt_a), (pred_b, gt_b)])
    assert res["mIoU"] == round(miou * 100, 2) == 60.71
    assert res["aAcc"] == round(aacc * 100, 2) and res["mAcc"] == round(macc * 100, 2)
    # the per-image mean would differ: image B alone has mIoU (0 + 1/2) / 2, so pooling matters
    assert res["mIoU"] != round((np.nanmean([1 / 2, 2 / 3, 1]) + 0.25) / 2 * 100, 2)


def test_folder_without_annotations(tmp_path):
    _write_pair(tmp_path, "validation", "ADE_val_00000001", _ade_labels()["ADE_val_00000001"])
    import shutil
    shutil.rmtree(tmp_path / "annotations")
    with pytest.raises(FileNotFoundError, match=r"annotation folder not found: .*annotations/validation"):
        _dataset(ADE_CFG, tmp_path)


def test_image_without_its_label_map(tmp_path):
    for stem, lab in _ade_labels().items():
        _write_pair(tmp_path, "validation", stem, lab)
    os.remove(tmp_path / "annotations/validation/ADE_val_00000002.png")
    with pytest.raises(FileNotFoundError, match="ADE_val_00000002.png"):
        _dataset(ADE_CFG, tmp_path)


def test_label_map_of_another_size(tmp_path):
    lab = _ade_labels()["ADE_val_00000001"]
    _write_pair(tmp_path, "validation", "ADE_val_00000001", lab)
    _write_pair(tmp_path, "validation", "ADE_val_00000002", lab, image_size=(30, 32))
    ds = _dataset(ADE_CFG, tmp_path)
    assert ds[0]["data_samples"].gt_sem_seg.data.shape[-2:] == lab.shape
    with pytest.raises(ValueError, match=r"ADE_val_00000002\.png.*size"):
        ds[1]
    train = _dataset(ADE_CFG, tmp_path, pipeline="train_pipeline")  # also refused before the random crop
    with pytest.raises(ValueError, match=r"ADE_val_00000002\.png"):
        train[1]


def test_label_values_above_the_class_count(tmp_path):
    lab = _ade_labels()["ADE_val_00000001"].copy()
    _write_pair(tmp_path, "validation", "ADE_val_00000001", lab)
    lab[0, 0] = 151  # raw labels are 1..150
    _write_pair(tmp_path, "validation", "ADE_val_00000002", lab)
    ds = _dataset(ADE_CFG, tmp_path)
    ds[0]
    with pytest.raises(ValueError, match=r"ADE_val_00000002\.png: label values \[151\]"):
        ds[1]
    # scenes: no reduce_zero_label, 11 classes -> 11 is out of range
    scenes = np.zeros((64, 64), np.uint8)
    scenes[3, 3] = 11
    _write_pair(tmp_path / "scenes", "validation", "scene_000000", scenes)
    with pytest.raises(ValueError, match=r"scene_000000\.png: label values \[11\]"):
        _dataset(SCENES_CFG, tmp_path / "scenes")[0]


@pytest.mark.skipif(not os.path.isdir(FMNIST), reason="Fashion-MNIST not installed (make data)")
def test_make_scenes_deterministic_layout(tmp_path):
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes

    def files(root):
        out = {}
        for d, _, fs in os.walk(root):
            for f in fs:
                p = os.path.join(d, f)
                out[os.path.relpath(p, root)] = open(p, "rb").read()
        return out

    make_scenes(tmp_path / "a", seed=3, num_train=4, num_val=2, size=64)
    make_scenes(tmp_path / "b", seed=3, num_train=4, num_val=2, size=64)
    make_scenes(tmp_path / "c", seed=4, num_train=4, num_val=2, size=64)
    a, b, c = files(tmp_path / "a"), files(tmp_path / "b"), files(tmp_path / "c")
    assert sorted(a) == sorted(
        [f"images/training/scene_{i:06d}.jpg" for i in range(4)] + [f"annotations/training/scene_{i:06d}.png"
                                                                     for i in range(4)]
        + [f"images/validation/scene_{i:06d}.jpg" for i in range(2)]
        + [f"annotations/validation/scene_{i:06d}.png" for i in range(2)])
    assert a == b and a != c
    for i in range(4):
        lab = np.asarray(Image.open(tmp_path / f"a/annotations/training/scene_{i:06d}.png"))
        img = np.asarray(Image.open(tmp_path / f"a/images/training/scene_{i:06d}.jpg"))
        assert lab.shape == (64, 64) and img.shape == (64, 64, 3) and lab.max() <= 10
        assert (lab == 0).any() and (lab > 0).sum() > 28 * 0.6 * 28 * 0.6 * 0.2  # background and >= 1 item
    # the scenes dataset reads them as stored (background = class 0, no reduce_zero_label)
    ds = _dataset(SCENES_CFG, tmp_path / "a")
    assert len(ds.metainfo["classes"]) == 11 and ds.metainfo["classes"][0] == "background"
    lab = np.asarray(Image.open(tmp_path / "a/annotations/validation/scene_000001.png"))
    assert np.array_equal(ds[1]["data_samples"].gt_sem_seg.data[0].numpy(), lab)


def _rolled(array, dx, dy, fill):
    """Independent reference for a shift: np.roll, then overwrite the rows/columns that wrapped around."""
    out = np.roll(array, (dy, dx), axis=(0, 1)).copy()
    if dy > 0:
        out[:dy] = fill
    elif dy < 0:
        out[dy:] = fill
    if dx > 0:
        out[:, :dx] = fill
    elif dx < 0:
        out[:, dx:] = fill
    return out


@pytest.mark.parametrize("dx, dy", [(3, -2), (-5, 4), (0, 7), (-1, 0), (0, 0)])
def test_random_translate_shift_matches_roll(dx, dy):
    from tasks.seg.transforms import RandomTranslate
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (10, 12, 3), dtype=np.uint8)
    seg = rng.integers(0, 11, (10, 12), dtype=np.uint8)
    assert np.array_equal(RandomTranslate.shift(img, dx, dy, 0), _rolled(img, dx, dy, 0))
    assert np.array_equal(RandomTranslate.shift(seg, dx, dy, 255), _rolled(seg, dx, dy, 255))
    # a shift past the frame leaves nothing but fill
    assert (RandomTranslate.shift(seg, 12, 0, 255) == 255).all()


def test_random_translate_moves_image_and_labels_together():
    from mmseg.registry import TRANSFORMS

    import tasks.seg.transforms  # noqa: F401  (registers it)
    t = TRANSFORMS.build(dict(type="RandomTranslate", max_shift=4))
    # every pixel's label is a function of its image value, so after the shift they must still agree
    img = np.arange(64, dtype=np.uint8).reshape(8, 8)[..., None].repeat(3, axis=2)
    seg = (np.arange(64).reshape(8, 8) % 11).astype(np.uint8)
    np.random.seed(1)
    seen = set()
    for _ in range(50):
        out = t(dict(img=img.copy(), gt_seg_map=seg.copy(), seg_fields=["gt_seg_map"]))
        dx, dy = out["translate"]
        assert -4 <= dx <= 4 and -4 <= dy <= 4
        seen.add((dx, dy))
        kept = out["gt_seg_map"] != 255
        assert kept.sum() == (8 - abs(dx)) * (8 - abs(dy))
        assert np.array_equal(out["img"][..., 0][kept] % 11, out["gt_seg_map"][kept])
        assert (out["img"][~kept] == 0).all() and out["img"].shape == img.shape
    assert len(seen) > 10  # it does draw different shifts
    # max_shift 0 and prob 0 leave the sample untouched
    for kw in (dict(max_shift=0), dict(max_shift=4, prob=0.0)):
        out = TRANSFORMS.build(dict(type="RandomTranslate", **kw))(dict(img=img.copy(), gt_seg_map=seg.copy(),
                                                                       seg_fields=["gt_seg_map"]))
        assert np.array_equal(out["img"], img) and np.array_equal(out["gt_seg_map"], seg)


@pytest.mark.parametrize("kw, msg", [(dict(max_shift=-1), "max_shift"), (dict(max_shift=2.5), "max_shift"),
                                     (dict(max_shift=2, prob=1.5), "prob")])
def test_random_translate_refuses_bad_arguments(kw, msg):
    from tasks.seg.transforms import RandomTranslate
    with pytest.raises(ValueError, match=msg):
        RandomTranslate(**kw)
