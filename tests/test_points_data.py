"""Point-cloud readers (real layouts written into tmp_path), transforms, metrics (against hand-computed values)
and the procedural shape generator."""
import json
import os
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("mmengine")
h5py = pytest.importorskip("h5py")

from tasks.points import datasets as D  # noqa: E402
from tasks.points import metrics as M  # noqa: E402
from tasks.points import transforms as T  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- writers of the real layouts (shared with test_points_configs.py) ---------------------------------------------
def write_modelnet_h5(root, n_train=2, n_test=2, n_points=2048, classes=("airplane", "bathtub", "bed")):
    """modelnet40_ply_hdf5_2048: ply_data_{split}0.h5 (data, label, normal), shape_names.txt, file lists."""
    root = os.path.join(root, "modelnet40_ply_hdf5_2048")
    os.makedirs(root)
    rng = np.random.default_rng(0)
    with open(os.path.join(root, "shape_names.txt"), "w") as f:
        f.write("\n".join(classes) + "\n")
    for split, n in (("train", n_train), ("test", n_test)):
        with h5py.File(os.path.join(root, f"ply_data_{split}0.h5"), "w") as f:
            f["data"] = rng.normal(size=(n, n_points, 3)).astype(np.float32)
            f["normal"] = rng.normal(size=(n, n_points, 3)).astype(np.float32)
            f["label"] = (np.arange(n) % len(classes)).astype(np.uint8)[:, None]
        with open(os.path.join(root, f"{split}_files.txt"), "w") as f:
            f.write(f"data/modelnet40_ply_hdf5_2048/ply_data_{split}0.h5\n")
    return root


def write_modelnet_normal(root, n_points=1100, classes=("night_stand", "xbox")):
    """modelnet40_normal_resampled: <class>/<class>_0001.txt comma rows, shape names, split files."""
    root = os.path.join(root, "modelnet40_normal_resampled")
    rng = np.random.default_rng(1)
    for c in classes:
        os.makedirs(os.path.join(root, c))
        for i in (1, 2):
            rows = np.concatenate([rng.normal(size=(n_points, 3)) * 3 + 5, rng.normal(size=(n_points, 3))], 1)
            np.savetxt(os.path.join(root, c, f"{c}_{i:04d}.txt"), rows, fmt="%.6f", delimiter=",")
    with open(os.path.join(root, "modelnet40_shape_names.txt"), "w") as f:
        f.write("\n".join(classes) + "\n")
    for split, i in (("train", 1), ("test", 2)):
        with open(os.path.join(root, f"modelnet40_{split}.txt"), "w") as f:
            f.write("".join(f"{c}_{i:04d}\n" for c in classes))
    return root


def write_shapenetpart(root, n_points=2100):
    """shapenetcore_partanno_segmentation_benchmark_v0_normal with two categories (Bag, Table)."""
    root = os.path.join(root, "shapenetcore_partanno_segmentation_benchmark_v0_normal")
    os.makedirs(os.path.join(root, "train_test_split"))
    cats = {"Bag": ("02773838", [4, 5]), "Table": ("04379243", [47, 48, 49])}
    with open(os.path.join(root, "synsetoffset2category.txt"), "w") as f:
        f.write("".join(f"{c}\t{s}\n" for c, (s, _) in cats.items()))
    rng = np.random.default_rng(2)
    for split in ("train", "val", "test"):
        entries = []
        for c, (synset, parts) in cats.items():
            os.makedirs(os.path.join(root, synset), exist_ok=True)
            token = f"{split}{c.lower()}"
            rows = np.concatenate([rng.normal(size=(n_points, 6)), rng.choice(parts, (n_points, 1))], 1)
            np.savetxt(os.path.join(root, synset, f"{token}.txt"), rows, fmt="%.6f")
            entries.append(f"shape_data/{synset}/{token}")
        with open(os.path.join(root, "train_test_split", f"shuffled_{split}_file_list.json"), "w") as f:
            json.dump(entries, f)
    return root


# -- readers --------------------------------------------------------------------------------------------------------
def test_modelnet_h5_reader(tmp_path):
    root = write_modelnet_h5(tmp_path, n_train=3)
    ds = D.ModelNet40H5(root, split="train")
    with h5py.File(os.path.join(root, "ply_data_train0.h5")) as f:
        data, label = f["data"][()], f["label"][()]
    assert len(ds) == 3 and ds.metainfo["classes"] == ("airplane", "bathtub", "bed")
    s = ds[2]
    np.testing.assert_array_equal(s["points"], data[2])
    assert s["label"] == int(label[2, 0]) == 2
    assert ds.__class__(root, split="test", use_normals=True)[0]["points"].shape == (2048, 6)


def test_modelnet_h5_bad_files(tmp_path):
    root = write_modelnet_h5(tmp_path)
    with h5py.File(os.path.join(root, "ply_data_train0.h5"), "w") as f:
        f["points"] = np.zeros((2, 2048, 3), np.float32)
        f["label"] = np.zeros((2, 1), np.uint8)
    with pytest.raises(ValueError, match=r"lacks key\(s\) \['data'\]"):
        D.ModelNet40H5(root, split="train")
    with h5py.File(os.path.join(root, "ply_data_train0.h5"), "w") as f:
        f["data"] = np.zeros((2, 2048, 4), np.float32)
        f["label"] = np.zeros((2, 1), np.uint8)
    with pytest.raises(ValueError, match=r"'data' must be \(S, N, 3\), got shape \(2, 2048, 4\)"):
        D.ModelNet40H5(root, split="train")
    with h5py.File(os.path.join(root, "ply_data_train0.h5"), "w") as f:
        f["data"] = np.zeros((2, 2048, 3), np.float32)
        f["label"] = np.zeros((3, 1), np.uint8)
    with pytest.raises(ValueError, match=r"'label' must be \(S, 1\) with S=2"):
        D.ModelNet40H5(root, split="train")
    with h5py.File(os.path.join(root, "ply_data_train0.h5"), "w") as f:
        f["data"] = np.zeros((2, 2048, 3), np.float32)
        f["label"] = np.array([[0], [7]], np.uint8)
    with pytest.raises(ValueError, match="shape_names.txt has 3 classes"):
        D.ModelNet40H5(root, split="train")


def test_modelnet_normal_reader(tmp_path):
    root = write_modelnet_normal(tmp_path)
    ds = D.ModelNet40Normal(root, split="test", use_normals=True, num_points=1024)
    assert len(ds) == 2 and ds.metainfo["classes"] == ("night_stand", "xbox")
    s = ds[1]
    rows = np.loadtxt(os.path.join(root, "xbox", "xbox_0002.txt"), delimiter=",")[:1024]
    xyz = rows[:, :3] - rows[:, :3].mean(0)
    xyz /= np.sqrt((xyz ** 2).sum(1)).max()
    assert s["label"] == 1 and s["points"].shape == (1024, 6)
    np.testing.assert_allclose(s["points"][:, :3], xyz, atol=1e-5)
    np.testing.assert_allclose(s["points"][:, 3:], rows[:, 3:], atol=1e-5)
    np.savetxt(os.path.join(root, "xbox", "xbox_0002.txt"), np.zeros((5, 3)), delimiter=",")
    with pytest.raises(ValueError, match=r"xbox_0002.txt must hold comma-separated rows .* got 3"):
        ds[1]


def test_shapenetpart_reader(tmp_path):
    root = write_shapenetpart(tmp_path)
    ds = D.ShapeNetPart(root, split="trainval")
    assert len(ds) == 4
    s = ds[1]  # train, Table: the 16th category in alphabetical order
    rows = np.loadtxt(os.path.join(root, "04379243", "traintable.txt"))
    assert s["category"] == 15 and s["points"].shape == (2100, 3)
    np.testing.assert_array_equal(s["seg"], rows[:, 6].astype(int))
    assert ds.metainfo["parts"][15] == (47, 48, 49)


def test_shapenetpart_bad_files(tmp_path):
    root = write_shapenetpart(tmp_path)
    path = os.path.join(root, "02773838", "testbag.txt")
    np.savetxt(path, np.concatenate([np.zeros((4, 6)), np.full((4, 1), 12.0)], 1))
    with pytest.raises(ValueError, match=r"testbag.txt \(Bag\) has part ids \[12\] outside its category's parts"):
        D.ShapeNetPart(root, split="test")[0]
    np.savetxt(path, np.zeros((4, 6)))
    with pytest.raises(ValueError, match=r"x y z nx ny nz part' \(7 values\), got 6"):
        D.ShapeNetPart(root, split="test")[0]
    with open(os.path.join(root, "synsetoffset2category.txt"), "a") as f:
        f.write("Sofa\t04256520\n")
    with pytest.raises(ValueError, match="Sofa"):
        D.ShapeNetPart(root, split="test")


# -- transforms -----------------------------------------------------------------------------------------------------
def test_scale_shift_is_per_axis_affine_in_range():
    np.random.seed(0)
    pts = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
    out = T.PointScaleShift()(dict(points=pts.copy()))["points"]
    for a in range(3):
        s, t = np.polyfit(pts[:, a], out[:, a], 1)  # exact line fit: out = s * in + t
        assert 2 / 3 - 1e-4 <= s <= 1.5 + 1e-4 and -0.2 - 1e-4 <= t <= 0.2 + 1e-4
        np.testing.assert_allclose(out[:, a], s * pts[:, a] + t, atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(out[:, 3:6], axis=1), 1, atol=1e-5)


def test_dropout_replaces_points_and_labels_by_the_first():
    np.random.seed(3)
    pts = np.arange(200 * 3, dtype=np.float32).reshape(200, 3)
    seg = np.arange(200)
    out = T.PointDropout(max_ratio=0.875)(dict(points=pts.copy(), seg=seg.copy()))
    changed = np.where(out["seg"] != seg)[0]
    assert len(changed) > 0 and out["points"].shape == (200, 3)
    assert (out["seg"][changed] == 0).all() and (out["points"][changed] == pts[0]).all()
    kept = np.setdiff1d(np.arange(200), changed)
    assert (out["points"][kept] == pts[kept]).all()


def test_sample_first_and_pack():
    pts, seg = np.arange(15, dtype=np.float32).reshape(5, 3), np.arange(5)
    out = T.PointSample(num_points=7, mode="first")(dict(points=pts, seg=seg, category=3))
    assert out["seg"].tolist() == [0, 1, 2, 3, 4, 0, 1]
    packed = T.PackPointInputs()(out)
    assert packed["inputs"].shape == (7, 3) and packed["data_samples"]["category"].item() == 3


# -- metrics --------------------------------------------------------------------------------------------------------
def test_oa_and_macc_by_hand():
    labels, preds = [0, 1, 1, 2, 2, 2], [0, 0, 1, 2, 2, 0]
    m = M.PointClsMetric()
    m.process(None, [dict(pred=p, label=y) for p, y in zip(preds, labels)])
    out = m.compute_metrics(m.results)
    # OA: 4 of 6 right. Recall per class: 0 -> 1/1, 1 -> 1/2, 2 -> 2/3.
    assert out["OA"] == pytest.approx(100 * 4 / 6)
    assert out["mAcc"] == pytest.approx(100 * (1 + 1 / 2 + 2 / 3) / 3)


def test_part_miou_by_hand():
    m = M.PartIoUMetric()  # ShapeNetPart table: Bag = category 1, parts (4, 5); Cap = category 2, parts (6, 7)
    L = np.full((4, 50), -10.0, np.float32)
    bag1 = L.copy()
    bag1[:, 0] = 9.0  # an Airplane part scores highest everywhere: must be ignored for a Bag
    bag1[[0, 1, 2], 4] = 1.0  # restricted prediction: 4, 4, 4, 5
    bag1[3, 5] = 1.0
    # gt 4, 4, 5, 5 -> part 4: I=2, U=3; part 5: I=1, U=2 -> shape IoU (2/3 + 1/2) / 2
    bag2 = L.copy()
    bag2[:, 5] = 1.0  # all 5; gt all 5 -> part 5: 1; part 4 absent from both: 1 -> shape IoU 1
    cap = L.copy()
    cap[:, 7] = 1.0  # all 7; gt 6, 6, 7, 7 -> part 6: 0/2, part 7: 2/4 -> shape IoU 1/4
    m.process(None, [dict(seg_logits=torch.from_numpy(bag1), seg=torch.tensor([4, 4, 5, 5]), category=1),
                     dict(seg_logits=torch.from_numpy(bag2), seg=torch.tensor([5, 5, 5, 5]), category=1),
                     dict(seg_logits=torch.from_numpy(cap), seg=torch.tensor([6, 6, 7, 7]), category=2)])
    out = m.compute_metrics(m.results)
    s1, s2, s3 = (2 / 3 + 1 / 2) / 2, 1.0, 0.25
    assert out["instance_mIoU"] == pytest.approx(100 * (s1 + s2 + s3) / 3)
    assert out["class_mIoU"] == pytest.approx(100 * (((s1 + s2) / 2) + s3) / 2)


# -- the shape generator --------------------------------------------------------------------------------------------
def test_make_shapes_is_deterministic_and_readable(tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_shapes
    for out in ("a", "b"):
        make_shapes.main(["--out", str(tmp_path / out), "--seed", "3", "--train", "1", "--val", "1", "--test", "1"])
    files = sorted(os.path.relpath(os.path.join(d, f), tmp_path / "a")
                   for d, _, fs in os.walk(tmp_path / "a") for f in fs)
    assert len(files) == 5 + 1 + 3 + 12 * 3
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    cls = D.ModelNet40H5(str(tmp_path / "a" / "modelnet40_ply_hdf5_2048"), split="train")
    assert len(cls) == 12 and len(cls.metainfo["classes"]) == 12
    seg = D.ShapeNetPart(str(tmp_path / "a" / "shapenetcore_partanno_segmentation_benchmark_v0_normal"), "test",
                         use_normals=True)
    parts_seen = {}
    for i in range(len(seg)):
        s = seg[i]
        assert s["points"].shape[1] == 6 and len(s["points"]) >= 2048
        np.testing.assert_allclose(np.linalg.norm(s["points"][:, 3:], axis=1), 1, atol=1e-4)
        parts_seen[s["category"]] = set(np.unique(s["seg"]).tolist())
    assert len(parts_seen) == 12 and all(2 <= len(p) <= 4 for p in parts_seen.values())
