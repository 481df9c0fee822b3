"""The pcls/pseg configs: the set and its recipe, and one training iteration plus one evaluation through
tools/train.py and tools/test.py on small files in each real layout (ModelNet40 HDF5, ModelNet40 resampled text,
ShapeNetPart)."""
import glob
import os
import re
import sys

import pytest

pytest.importorskip("mmengine")

from test_points_data import write_modelnet_h5, write_modelnet_normal, write_shapenetpart  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
MIXERS = ("sa", "ea", "effa", "ff")
SIZES = ("micro", "tiny", "small", "base")


def _configs(task):
    return sorted(glob.glob(os.path.join(ROOT, "configs", task, "pct_*.py")))


def test_the_config_set():
    names = {os.path.basename(p) for p in _configs("pcls") + _configs("pseg")}
    for m in MIXERS:
        for s in SIZES:
            assert f"pct_{m}-vit-{s}_1xb32-250e_modelnet40-1024.py" in names
            assert f"pct_{m}-vit-{s}_1xb32-250e_shapenetpart-2048.py" in names
        assert f"pct_{m}-vit-micro_1xb16-6e_shapes-256.py" in names
        assert f"pct_{m}-vit-micro_1xb16-12e_shapes-part-256.py" in names


@pytest.mark.parametrize("path", _configs("pcls") + _configs("pseg"), ids=os.path.basename)
def test_recipe(path):
    from mmengine.config import Config
    cfg = Config.fromfile(path)
    mixer, size = re.match(r"pct_(\w+)-vit-(\w+)_", os.path.basename(path)).groups()
    assert cfg.model.name == f"{mixer}_vit_{size}"
    assert cfg.custom_imports.imports == ["tasks.points"]
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.momentum, opt.weight_decay) == ("SGD", 0.9, 5e-4)
    assert cfg.param_scheduler[0].type == "CosineAnnealingLR" and cfg.model.label_smoothing == 0.2
    if "250e" in path:
        assert opt.lr == 0.01 and cfg.train_cfg.max_epochs == 250 and cfg.train_dataloader.batch_size == 32
        expect = 1024 if "/pcls/" in path else 2048
        assert cfg.model.num_points == expect
        assert cfg.test_dataloader.dataset.pipeline[0] == dict(type="PointSample", num_points=expect, mode="first")
        train_types = [t["type"] for t in cfg.train_dataloader.dataset.pipeline]
        assert {"PointScaleShift", "PointShuffle"} <= set(train_types)
        assert ("PointDropout" in train_types) == ("/pcls/" in path)  # PCT: dropout for classification only


def _train_and_test(config, work_dir, data_root, extra=()):
    import tools.test as test_tool
    import tools.train as train_tool
    opts = [f"{loader}.dataset.data_root={data_root}" for loader in ("train_dataloader", "val_dataloader",
                                                                      "test_dataloader")]
    opts += [f"{loader}.{k}" for loader in ("train_dataloader", "val_dataloader", "test_dataloader")
             for k in ("batch_size=2", "num_workers=0", "persistent_workers=False")]
    opts += ["train_cfg.max_epochs=1", "train_cfg.val_interval=1", "default_hooks.logger.interval=1", *extra]
    config = os.path.join(ROOT, config)
    train_tool.main([config, "--work-dir", str(work_dir), "--cfg-options", *opts])
    ckpt = os.path.join(work_dir, "epoch_1.pth")
    assert os.path.isfile(ckpt)
    return test_tool.main([config, ckpt, "--work-dir", str(work_dir), "--cfg-options", *opts])


def test_modelnet40_h5_one_iteration_and_evaluation(tmp_path):
    root = write_modelnet_h5(tmp_path, n_train=2, n_test=3)
    metrics = _train_and_test("configs/pcls/pct_sa-vit-micro_1xb32-250e_modelnet40-1024.py", tmp_path / "wd",
                              root, ["model.num_classes=3"])
    assert set(metrics) >= {"OA", "mAcc"} and 0 <= metrics["OA"] <= 100


def test_modelnet40_normal_one_iteration_and_evaluation(tmp_path):
    root = write_modelnet_normal(tmp_path)
    metrics = _train_and_test("configs/pcls/pct_sa-vit-tiny_1xb32-250e_modelnet40-normal-1024.py", tmp_path / "wd",
                              root, ["model.name=ff_vit_micro", "model.num_classes=2"])
    assert set(metrics) >= {"OA", "mAcc"}


def test_shapenetpart_one_iteration_and_evaluation(tmp_path):
    root = write_shapenetpart(tmp_path)
    metrics = _train_and_test("configs/pseg/pct_ea-vit-micro_1xb32-250e_shapenetpart-2048.py", tmp_path / "wd",
                              root)
    assert set(metrics) >= {"instance_mIoU", "class_mIoU"} and 0 <= metrics["class_mIoU"] <= 100


def test_zoo_model_of_the_wrapper_is_what_zoo_load_builds():
    import torch
    from mmengine.registry import MODELS

    import tasks.points  # noqa: F401
    import zoo
    wrapper = MODELS.build(dict(type="ZooPartSegmenter", name="effa_vit_micro", num_points=64, k=4))
    inner = wrapper.zoo_model
    assert inner.zoo_config == dict(name="effa_vit_micro", task="pseg", args=dict(num_points=64, k=4))
    again = zoo.load(**{k: v for k, v in inner.zoo_config.items() if k != "args"}, **inner.zoo_config["args"])
    again.load_state_dict(inner.state_dict())
    x, c = torch.randn(2, 64, 3), torch.tensor([0, 1])
    torch.testing.assert_close(again.eval()(x, c), inner.eval()(x, c))


def test_predict_one_pass_and_voting():
    import torch
    from mmengine.registry import MODELS

    import tasks.points  # noqa: F401
    torch.manual_seed(0)
    x, labels = torch.randn(3, 64, 3), torch.tensor([0, 1, 2])
    one = MODELS.build(dict(type="ZooPointClassifier", name="sa_vit_micro", num_classes=5, num_points=64, k=4)).eval()
    with torch.no_grad():
        out = one(x, dict(label=labels), mode="predict")
        logits = one(x, mode="tensor")
    assert [o["pred"] for o in out] == logits.argmax(-1).tolist() and [o["label"] for o in out] == [0, 1, 2]
    one.vote = 4
    with torch.no_grad():
        voted = one(x, dict(label=labels), mode="predict")
    for o in voted:
        assert o["scores"].sum().item() == pytest.approx(1.0, abs=1e-5) and o["pred"] == o["scores"].argmax().item()
