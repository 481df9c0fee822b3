"""Each fact has one home and everything else reads it: a second copy that drifts fails here.

Dataset facts (class names, mean/std, ShapeNetPart parts) live in ``zoo.datasets``, tasks in ``zoo.registry.TASKS``,
the tag grammar in ``zoo.pretrained.parse_tag``, mixer metadata on the mixer classes. The mmengine configs cannot
import the zoo (mmengine would read them as lazy-import configs), so their copies of the numbers are compared here.
"""
import gzip
import os
import re
import struct
import sys

import numpy as np
import pytest

import zoo
from zoo import cards, datasets, mixers, registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- dataset facts -----------------------------------------------------------------------------------------------
def test_loaders_and_cards_share_the_class_names():
    pytest.importorskip("mmseg")
    from tasks.cls.datasets import FashionMNIST
    from tasks.gen.datasets import CIFAR10Batches, FashionMNIST32
    from tasks.points.datasets import ShapeNetPart
    from tasks.seg.datasets import FashionScenesDataset
    assert FashionMNIST.classes is FashionMNIST32.CLASSES is datasets.FASHION_MNIST_CLASSES
    assert datasets.DATASETS["fmnist"]["classes"] is datasets.FASHION_MNIST_CLASSES
    assert CIFAR10Batches.CLASSES is datasets.DATASETS["cifar10"]["classes"]
    assert FashionScenesDataset.METAINFO["classes"] is datasets.DATASETS["scenes"]["classes"]
    assert datasets.SCENES_CLASSES[1:] == datasets.FASHION_MNIST_CLASSES
    assert ShapeNetPart.CATEGORIES is datasets.SHAPENET_CATEGORIES
    # the card's labels are the record's classes; the card keeps only its own fields of the record
    info = cards.dataset_info("fmnist")
    assert info["label_names"] == list(datasets.FASHION_MNIST_CLASSES)
    assert set(info) <= set(cards.CARD_FIELDS) | {"label_names", "key"}
    assert cards.DATASETS is datasets.DATASETS


def test_upstream_entries_take_dataset_facts_from_the_records():
    for tag, entry in zoo.registry.PRETRAINED.items():
        record = datasets.DATASETS.get(entry.dataset)
        if record is None or entry.metrics_source == "measured here":
            continue
        assert entry.dataset_name == record["name"], tag
        if record.get("mean") is not None:
            assert tuple(entry.mean) == tuple(record["mean"]) and tuple(entry.std) == tuple(record["std"]), tag


def _config(path):
    pytest.importorskip("mmengine")
    from mmengine.config import Config
    return Config.fromfile(os.path.join(ROOT, path))


@pytest.mark.parametrize("path, key", [("configs/cls/_base_/datasets/fmnist_28.py", "fmnist"),
                                       ("configs/cls/_base_/datasets/imagenet_224.py", "in1k")])
def test_cls_configs_normalise_with_the_dataset_record(path, key):
    cfg = _config(path)
    record = datasets.DATASETS[key]
    np.testing.assert_allclose(np.array(cfg.mean) / 255, record["mean"], atol=5e-4)
    np.testing.assert_allclose(np.array(cfg.std) / 255, record["std"], atol=5e-4)


def test_seg_recipe_normalises_with_imagenet_statistics():
    cfg = _config("configs/seg/_base_/models/upernet_zoo-vit.py")
    for key in ("ade20k", "scenes"):
        np.testing.assert_allclose(np.array(cfg.data_preprocessor.mean) / 255, datasets.DATASETS[key]["mean"],
                                   atol=5e-4)
        np.testing.assert_allclose(np.array(cfg.data_preprocessor.std) / 255, datasets.DATASETS[key]["std"],
                                   atol=5e-4)



@pytest.mark.parametrize("path, key", [("configs/seg/_base_/datasets/ade20k.py", "ade20k"),
                                       ("configs/seg/_base_/datasets/fashion_scenes.py", "scenes")])
def test_preprocess_resizes_segmentation_images_as_the_test_pipeline(path, key):
    resize = [t for t in _config(path).test_pipeline if t["type"] == "Resize"]
    assert len(resize) == 1 and resize[0]["keep_ratio"] is True
    assert tuple(resize[0]["scale"]) == datasets.DATASETS[key]["test_scale"]

def test_generated_shapes_use_the_shapenetpart_table():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    try:
        import make_shapes
    finally:
        sys.path.remove(os.path.join(ROOT, "tools"))
    rng = np.random.default_rng(0)
    for name, make in make_shapes.CATEGORIES.items():
        for _ in range(4):  # parts are optional in some categories: a few draws
            assert set(make(rng)) <= set(datasets.SHAPENET_PARTS[name]), name
    assert set(make_shapes.SYNSETS) <= set(datasets.SHAPENET_PARTS)


# -- the one IDX reader ------------------------------------------------------------------------------------------
def _idx_bytes(array, magic):
    array = np.ascontiguousarray(array, dtype=np.uint8)
    return struct.pack(">i", magic) + b"".join(struct.pack(">i", d) for d in array.shape) + array.tobytes()


def _write_split(root, split, images, labels, compress=True):
    for kind, arr, magic in (("images-idx3", images, 2051), ("labels-idx1", labels, 2049)):
        path = os.path.join(root, f"{split}-{kind}-ubyte" + (".gz" if compress else ""))
        with (gzip.open if compress else open)(path, "wb") as f:
            f.write(_idx_bytes(arr, magic))


@pytest.mark.parametrize("compress", [True, False])
def test_fashion_mnist_reads_gzipped_and_raw_idx(tmp_path, compress):
    images = np.arange(3 * 28 * 28, dtype=np.uint8).reshape(3, 28, 28)
    labels = np.array([0, 9, 4], dtype=np.uint8)
    _write_split(tmp_path, "t10k", images, labels, compress=compress)
    got_images, got_labels = datasets.read_fashion_mnist(str(tmp_path), "test")
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)


def test_idx_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"train-images-idx3-ubyte\.gz.*dataset-fashion-mnist"):
        datasets.read_fashion_mnist(str(tmp_path), "train")
    # a gzip stream cut short
    data = gzip.compress(_idx_bytes(np.zeros((4, 28, 28)), 2051))
    cut = tmp_path / "cut.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=re.escape(str(cut))):
        datasets.read_idx(cut, 2051)
    # a header without its sizes
    short = tmp_path / "short.idx"
    short.write_bytes(struct.pack(">i", 2051) + b"\0\0")
    with pytest.raises(ValueError, match=re.escape(str(short)) + ".*too short"):
        datasets.read_idx(short, 2051)
    # labels beyond the 10 classes
    _write_split(tmp_path, "train", np.zeros((2, 28, 28)), np.array([3, 10]))
    with pytest.raises(ValueError, match=r"train-labels-idx1-ubyte\.gz: label 10 >= 10 classes"):
        datasets.read_fashion_mnist(str(tmp_path), "train")


def test_no_other_idx_reader():
    """IDX files are parsed in zoo/datasets.py only (the loaders and tools call it)."""
    offenders = []
    for folder in ("zoo", "tasks", "tools"):
        for root, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                path = os.path.join(root, f)
                if not f.endswith(".py") or path == os.path.join(ROOT, "zoo", "datasets.py"):
                    continue
                text = open(path).read()
                if re.search(r"def \w*idx\w*\(|0x0803|2051\b", text):
                    offenders.append(os.path.relpath(path, ROOT))
    assert not offenders, f"IDX parsing outside zoo/datasets.py: {offenders}"


# -- tasks, tags, mixers -----------------------------------------------------------------------------------------
def test_one_task_table():
    assert not hasattr(cards, "TASKS") and not hasattr(cards, "PRIMARY_METRICS")
    for code, task in registry.TASKS.items():
        assert registry.resolve_task(code) == code
        for alias in task.aliases:
            assert registry.resolve_task(alias) == code
        assert task.metrics and task.pipeline_tag and task.index_name
    cfg = dict(name="sa_vit_micro", task="pcls", architecture=dict(mixer="sa", arch="vit", size="micro"), args={})
    assert cards.card_metadata(cfg)["pipeline_tag"] == registry.TASKS["pcls"].pipeline_tag


def test_tags_are_split_by_parse_tag_only():
    """No hand-split of a tag string (``tag.split(".")``, ``rsplit``, ``partition``) outside zoo/pretrained.py."""
    pattern = re.compile(r"\btag\w*\s*\.\s*(r?split|r?partition)\(")
    offenders = []
    for folder in ("zoo", "tasks", "tools"):
        for root, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in files:
                path = os.path.join(root, f)
                if f.endswith(".py") and pattern.search(open(path).read()):
                    offenders.append(os.path.relpath(path, ROOT))
    assert not offenders, f"tags split by hand in {offenders}; use zoo.pretrained.parse_tag"


def test_mixer_metadata_lives_on_the_class():
    for code, cls in mixers.MIXERS.items():
        info = mixers.info(code)
        assert info == {k: getattr(cls, k, None) for k in mixers.INFO_FIELDS}
        assert info["paper"] and info["citation"], code


def test_seg_config_reads_the_recipe_of_zoo_load():
    """configs/seg/_base_/models/upernet_zoo-vit.py takes its model from zoo.heads.seg.model_cfg (the recipe
    zoo.load builds), so the two cannot diverge; a re-typed copy of the recipe in the config fails here."""
    pytest.importorskip("mmseg")
    from zoo.heads.seg import model_cfg
    path = os.path.join(ROOT, "configs/seg/_base_/models/upernet_zoo-vit.py")
    assert re.search(r"^model = model_cfg\(", open(path).read(), re.M)
    cfg = _config("configs/seg/_base_/models/upernet_zoo-vit.py")
    expected = model_cfg("sa_vit_base", num_classes=150, img_size=512, patch_size=16, drop_path_rate=0.1).to_dict()
    expected["backbone"]["checkpoint"] = None
    expected["test_cfg"]["return_logits"] = False  # the configs evaluate labels only (ZooEncoderDecoder.predict)
    assert cfg.model.to_dict() == expected
    assert cfg.data_preprocessor.to_dict() == expected["data_preprocessor"]
