"""Bad input to training and evaluation stops with an error naming its cause: a checkpoint of another mixer, an
empty or truncated checkpoint, a missing ``--json-out`` folder, NaN/inf in point data or in the loss (before any
checkpoint is rotated), truncated/short/unreadable data files; and ``--cfg-options`` that shortens a run shortens
its learning-rate schedule with it."""
import glob
import os
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("mmengine")
h5py = pytest.importorskip("h5py")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # tools/ is not a package that is installed

from test_points_data import write_modelnet_h5, write_shapenetpart  # noqa: E402

import tools.test as test_tool  # noqa: E402
import tools.train as train_tool  # noqa: E402
from tasks.points import datasets as D  # noqa: E402
PCLS = "configs/pcls/pct_{}-vit-micro_1xb32-250e_modelnet40-1024.py"


def _opts(data_root, epochs=1, extra=()):
    opts = [f"{loader}.{k}" for loader in ("train_dataloader", "val_dataloader", "test_dataloader")
            for k in (f"dataset.data_root={data_root}", "batch_size=2", "num_workers=0", "persistent_workers=False")]
    return [*opts, f"train_cfg.max_epochs={epochs}", "train_cfg.val_interval=100", "default_hooks.logger.interval=1",
            "model.num_classes=3", *extra]


def _config(mixer):
    return os.path.join(ROOT, PCLS.format(mixer))


@pytest.fixture(scope="module")
def ea_checkpoint(tmp_path_factory):
    """One epoch of the ``ea`` pcls micro model on a tiny ModelNet40 HDF5 set: (data root, checkpoint path)."""
    tmp = tmp_path_factory.mktemp("ea")
    root = write_modelnet_h5(tmp, n_train=2, n_test=2)
    train_tool.main([_config("ea"), "--work-dir", str(tmp / "wd"), "--cfg-options", *_opts(root)])
    return root, str(tmp / "wd" / "epoch_1.pth")


# -- tools/test.py loads strictly ------------------------------------------------------------------------------------
def test_checkpoint_of_another_mixer_fails_naming_keys(ea_checkpoint, tmp_path):
    root, ckpt = ea_checkpoint
    with pytest.raises(SystemExit) as e:
        test_tool.main([_config("sa"), ckpt, "--work-dir", str(tmp_path / "wd"), "--cfg-options", *_opts(root)])
    msg = str(e.value)
    assert f"checkpoint {ckpt}" in msg and "does not fit the config's model (sa_vit_micro)" in msg
    assert "mmengine training checkpoint" in msg  # the format it was read as
    assert "missing keys (" in msg and "unexpected keys (" in msg
    missing, unexpected = msg.split("missing keys (")[1].split("unexpected keys (")
    assert ".mixer.qkv.weight" in missing  # sa's projection, absent from the ea checkpoint
    assert ".mixer.linear_0.weight" in unexpected  # ea's memory unit, which sa does not have
    assert "evaluate it with the config it was trained with" in msg


def test_training_checkpoint_loads_with_zoo_load(ea_checkpoint):
    """What tools/train.py wrote (``model.`` + the zoo model's keys, optimizer, message hub) loads by name."""
    import zoo
    _, ckpt = ea_checkpoint
    trained = torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]  # written by this test module
    model = zoo.load("ea_vit_micro", task="pcls", num_classes=3, checkpoint=ckpt)
    own = model.state_dict()
    assert all(torch.equal(v, trained[f"model.{k}"]) for k, v in own.items())
    with pytest.raises(zoo.CheckpointError, match=rf"checkpoint {ckpt} \(mmengine training checkpoint, zoo layout\) "
                                                  r"does not fit sa_vit_micro:\n  missing keys \(\d+\): "):
        zoo.load("sa_vit_micro", task="pcls", num_classes=3, checkpoint=ckpt)


def test_checkpoint_of_its_own_config_still_evaluates(ea_checkpoint, tmp_path):
    root, ckpt = ea_checkpoint
    out = tmp_path / "metrics.json"
    metrics = test_tool.main([_config("ea"), ckpt, "--work-dir", str(tmp_path / "wd"), "--json-out", str(out),
                              "--cfg-options", *_opts(root)])
    assert out.is_file() and 0 <= metrics["OA"] <= 100


@pytest.mark.parametrize("content", [b"", b"truncated"], ids=["empty", "truncated"])
def test_empty_or_truncated_pth_names_the_file(ea_checkpoint, tmp_path, content):
    root, good = ea_checkpoint
    bad = tmp_path / "bad.pth"
    bad.write_bytes(content or b"")
    if content:  # the first half of a real checkpoint: what an interrupted copy leaves
        data = open(good, "rb").read()
        bad.write_bytes(data[:len(data) // 2])
    with pytest.raises(SystemExit) as e:
        test_tool.main([_config("ea"), str(bad), "--work-dir", str(tmp_path / "wd"), "--cfg-options", *_opts(root)])
    msg = str(e.value)
    assert f"cannot load checkpoint {bad}" in msg
    assert ("is empty (0 bytes)" in msg) if not content else ("is truncated" in msg)


def test_json_out_into_a_missing_folder_fails_before_evaluating(ea_checkpoint, tmp_path):
    root, ckpt = ea_checkpoint
    with pytest.raises(SystemExit, match=r"--json-out .*nope/m.json: folder .*nope does not exist; create it first"):
        test_tool.main([_config("ea"), ckpt, "--work-dir", str(tmp_path / "wd"), "--json-out",
                        str(tmp_path / "nope" / "m.json"), "--cfg-options", *_opts(root)])
    assert not (tmp_path / "wd").exists()  # nothing was built


# -- non-finite data and losses ----------------------------------------------------------------------------------------
def test_nan_shape_in_hdf5_is_refused_naming_file_shape_and_point(tmp_path):
    root = write_modelnet_h5(tmp_path, n_train=3)
    path = os.path.join(root, "ply_data_train0.h5")
    with h5py.File(path, "r+") as f:
        data = f["data"][()]
        data[1, 5, 2] = np.nan
        data[2, 0, 0] = np.inf
        f["data"][...] = data
    with pytest.raises(ValueError, match=rf"{path}: shape 1, point 5 holds NaN or inf .*2 shape\(s\) in all"):
        D.ModelNet40H5(root, split="train")
    # tools/train.py stops while building the data, before any checkpoint exists
    with pytest.raises(ValueError, match="shape 1, point 5 holds NaN"):
        train_tool.main([_config("sa"), "--work-dir", str(tmp_path / "wd"), "--cfg-options", *_opts(root)])
    assert not glob.glob(str(tmp_path / "wd" / "*.pth"))


def test_nan_row_in_text_files_names_file_and_row(tmp_path):
    root = write_shapenetpart(tmp_path, n_points=20)
    path = os.path.join(root, "02773838", "testbag.txt")
    rows = np.loadtxt(path)
    rows[3, 1] = np.nan
    np.savetxt(path, rows, fmt="%.6f")
    with pytest.raises(ValueError, match=rf"ShapeNetPart: {path}: data row 4 holds NaN or inf"):
        D.ShapeNetPart(root, split="test")[0]


class PoisonAfter:
    """A transform that turns every sample after the first ``n`` into NaN points (a loss that goes non-finite)."""

    def __init__(self, n):
        self.n, self.seen = n, 0

    def __call__(self, results):
        self.seen += 1
        if self.seen > self.n:
            results["points"] = np.full_like(results["points"], np.nan)
        return results


def test_non_finite_loss_stops_before_the_good_checkpoint_is_rotated(tmp_path):
    from mmengine.registry import TRANSFORMS
    TRANSFORMS.register_module(module=PoisonAfter, force=True)
    root = write_modelnet_h5(tmp_path, n_train=2)
    config = tmp_path / "poisoned.py"  # epoch 1 (2 samples) trains and is saved; epoch 2 sees NaN points
    config.write_text(f"_base_ = [{_config('sa')!r}]\n"
                      "train_dataloader = dict(dataset=dict(pipeline=[dict(type='PoisonAfter', n=2), "
                      "dict(type='PointSample', num_points=1024, mode='first'), dict(type='PackPointInputs')]))\n")
    wd = tmp_path / "wd"
    opts = _opts(root, epochs=2,
                 extra=["default_hooks.checkpoint.interval=1", "default_hooks.checkpoint.max_keep_ckpts=1"])
    with pytest.raises(FloatingPointError, match=r"non-finite loss at iteration 2 \(epoch 2, batch 1\): loss=nan.*"
                                                 r"last checkpoint in .* is intact.*--resume"):
        train_tool.main([str(config), "--work-dir", str(wd), "--cfg-options", *opts])
    assert sorted(os.path.basename(p) for p in glob.glob(str(wd / "*.pth"))) == ["epoch_1.pth"]
    assert open(wd / "last_checkpoint").read().strip().endswith("epoch_1.pth")
    state = torch.load(wd / "epoch_1.pth", map_location="cpu", weights_only=False)["state_dict"]  # written here
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())


def test_every_config_registers_the_non_finite_loss_hook():
    from mmengine.config import Config
    paths = sorted(glob.glob(os.path.join(ROOT, "configs", "*", "*.py")))
    tasks = {p.split(os.sep)[-2] for p in paths}
    assert tasks >= {"cls", "seg", "gen", "pcls", "pseg"}
    missing = [p for p in paths if Config.fromfile(p).default_hooks.get("finite_loss", {}).get("type")
               != "NonFiniteLossHook"]
    assert not missing


# -- unreadable data files name themselves -----------------------------------------------------------------------------
def test_truncated_hdf5_names_the_file(tmp_path):
    root = write_modelnet_h5(tmp_path)
    path = os.path.join(root, "ply_data_train0.h5")
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 3])
    with pytest.raises(ValueError, match=rf"ModelNet40H5: cannot (open|read) .*{path}.*truncated or damaged"):
        D.ModelNet40H5(root, split="train")


def test_short_shapenetpart_row_names_file_and_row(tmp_path):
    root = write_shapenetpart(tmp_path, n_points=10)
    path = os.path.join(root, "02773838", "testbag.txt")
    lines = open(path).read().splitlines()
    lines[4] = " ".join(lines[4].split()[:6])  # the part id is missing
    open(path, "w").write("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=rf"ShapeNetPart: {path}: .*row 5.*'x y z nx ny nz part' \(7 values\)"):
        D.ShapeNetPart(root, split="test")[0]


@pytest.mark.parametrize("content", [b"", b"\x89PNG\r\n\x1a\n\x00\x00", b"not an image"],
                         ids=["empty", "truncated", "garbage"])
def test_unreadable_label_png_names_the_file(tmp_path, content):
    import tasks.seg  # noqa: F401  (registers the transform)
    from tasks.seg.transforms import LoadCheckedAnnotations
    path = tmp_path / "ADE_val_00000001.png"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=rf"{path}: cannot read the label map .*Regenerate or re-copy it"):
        LoadCheckedAnnotations(num_classes=150)(dict(seg_map_path=str(path), reduce_zero_label=False, seg_fields=[]))


# -- --cfg-options that change the run length rescale the LR schedule ------------------------------------------------
def _load(config, *options):
    import argparse

    from tasks.common import cli
    parser = argparse.ArgumentParser()
    cli.add_common_args(parser, "")
    return cli.load_config(cli.parse(parser, [os.path.join(ROOT, config), "--cfg-options", *options]))


def _lrs(cfg, steps):
    """The learning rate at each of ``steps`` iterations under ``cfg.param_scheduler`` (iteration-based)."""
    from mmengine.optim.scheduler import LinearLR  # noqa: F401  (registers the schedulers)
    from mmengine.registry import PARAM_SCHEDULERS
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=cfg.optim_wrapper.optimizer.lr)
    scheds = [PARAM_SCHEDULERS.build(dict(s, optimizer=opt)) for s in cfg.param_scheduler]
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        for s in scheds:
            s.step()
    return out


def test_shorter_run_rescales_the_schedule(capsys):
    cfg = _load("configs/seg/upernet_sa-vit-base_8xb2-160k_ade20k-512x512.py", "train_cfg.max_iters=1600")
    assert [(s.type, s.begin, s.end) for s in cfg.param_scheduler] == [("LinearLR", 0, 15), ("PolyLR", 15, 1600)]
    assert "rescaled the 2 param_scheduler entries by 1600/160000" in capsys.readouterr().err

    config = "configs/cls/sa-vit-micro-p4_1xb128-300it_fmnist-28.py"
    cfg = _load(config, "train_cfg.max_iters=30")
    warm, cos = cfg.param_scheduler
    assert (warm.begin, warm.end, cos.begin, cos.end, cos.T_max) == (0, 3, 3, 30, 27)
    # The recipe's curve, 10x compressed: the warm-up starts at the same rate and peaks at its last iteration (3 - 1
    # here, 30 - 1 in the recipe); from then on iteration k runs the recipe's iteration 10k rate, down to eta_min.
    full, short = _lrs(_load(config, "train_cfg.max_iters=300"), 300), _lrs(cfg, 30)
    assert short[0] == pytest.approx(full[0]) and short[2] == pytest.approx(full[29]) == pytest.approx(2e-3)
    assert short[3:] == pytest.approx(full[30::10], rel=1e-6)

    cfg = _load("configs/pcls/pct_sa-vit-micro_1xb32-250e_modelnet40-1024.py", "train_cfg.max_epochs=5")
    (cos,) = cfg.param_scheduler
    assert (cos.begin, cos.end, cos.T_max, cos.convert_to_iter_based) == (0, 5, 5, True)


def test_schedule_option_given_keeps_the_schedule():
    cfg = _load("configs/seg/upernet_sa-vit-base_8xb2-160k_ade20k-512x512.py", "train_cfg.max_iters=1600",
                "param_scheduler.1.end=160000")
    assert [(s.begin, s.end) for s in cfg.param_scheduler] == [(0, 1500), (1500, 160000)]


# -- a config that is not there, weights of another task -------------------------------------------------------------
def test_missing_config_names_close_matches(capsys):
    wrong = _config("ea").replace("250e", "205e")
    for tool in (train_tool, test_tool):
        with pytest.raises(SystemExit) as e:
            tool.main([wrong, "x.pth"] if tool is test_tool else [wrong])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert f"config {wrong} not found; close matches: " in err
        assert os.path.relpath(_config("ea")) in err.split("close matches: ")[1]


def test_training_from_weights_of_another_task_is_one_line(tmp_path):
    """``tools/train.py SEG_CONFIG --pretrained CLS_TAG`` stops before training and names the tags that fit."""
    config = os.path.join(ROOT, "configs/seg/upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8.py")
    with pytest.raises(SystemExit) as e:
        train_tool.main([config, "--pretrained", "sa_vit_micro.cls_fmnist", "--work-dir", str(tmp_path / "wd")])
    assert str(e.value) == ("tools/train.py: error: pretrained weights sa_vit_micro.cls_fmnist holds a 'cls' model but "
                            "the config builds a 'seg' one; give weights of the same task (sa_vit_micro.seg_scenes).")
    assert not glob.glob(str(tmp_path / "wd" / "*.pth"))
