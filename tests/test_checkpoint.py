"""The one checkpoint I/O layer (zoo.checkpoint): every local format read by one reader, one strict check, one
exception type, and errors that name the file, the format it was read as and what is wrong.

Files are written here with torch / safetensors / mmengine directly (not by the code under test), and expected
weights are the models' own state dicts."""
import os
import pickle
import struct
import sys

import pytest
import torch
from safetensors.torch import save_file

import zoo
from zoo import checkpoint, convert, hub, upstream

from .test_hub import MICRO, micro, outputs  # the micro classifier and its fixed-input outputs


def message_hub_state():
    """What mmengine's Runner saves as ``message_hub``: HistoryBuffers holding numpy arrays. Built directly, not with
    ``get_instance``, so that it does not become mmengine's current message hub for the tests that follow."""
    from mmengine.logging import MessageHub
    hub_ = MessageHub("zoo-checkpoint-test")
    hub_.update_scalar("train/loss", 0.5)
    hub_.update_info("iter", 4)
    return hub_.state_dict()


def training_checkpoint(path, wrapper_state, **meta):
    """An mmengine checkpoint as tools/train.py writes it (state_dict, meta, optimizer, message_hub, schedulers)."""
    import numpy as np
    params = [v for v in wrapper_state.values() if v.is_floating_point()]
    ckpt = {"meta": {"epoch": 1, "iter": 4, "seed": np.int64(0), "experiment_name": "tiny", **meta},
            "state_dict": wrapper_state,
            "optimizer": torch.optim.AdamW([torch.nn.Parameter(p.clone()) for p in params[:2]]).state_dict(),
            "message_hub": message_hub_state(), "param_schedulers": []}
    torch.save(ckpt, path)
    return path


def test_every_error_derives_from_one_type():
    for cls in (hub.HubError, hub.ChecksumError, hub.ArchitectureMismatchError, hub.WeightsMismatchError,
                convert.CheckpointError, upstream.UpstreamError, checkpoint.UnsafeCheckpointError):
        assert issubclass(cls, zoo.CheckpointError)
    assert convert.CheckpointError is zoo.CheckpointError is checkpoint.CheckpointError
    assert issubclass(checkpoint.UnsafeCheckpointError, pickle.UnpicklingError)  # mmengine's callers catch that


def test_one_strict_check():
    import zoo.hub as hub_module
    assert not hasattr(hub_module, "check_state_dict") and not hasattr(convert, "check_state_dict")


# -- bad files: the error names the file, the format and the cause ---------------------------------------------------
def test_bad_safetensors_header(tmp_path):
    path = tmp_path / "weights.safetensors"
    header = b'{"w": not json'
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(zoo.CheckpointError) as err:
        zoo.load("ff_vit_micro", **MICRO, checkpoint=path)
    msg = str(err.value)
    assert f"{path} (safetensors, {8 + len(header)} bytes): its header is not a valid safetensors header" in msg


def test_truncated_safetensors(tmp_path):
    path = tmp_path / "model.safetensors"
    save_file(micro().state_dict(), str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(zoo.CheckpointError, match=rf"{path} \(safetensors, {len(data) // 2} bytes\): the file is "
                                                  r"truncated or corrupted"):
        zoo.load("ff_vit_micro", **MICRO, checkpoint=path)


@pytest.mark.parametrize("suffix,fmt", [(".safetensors", "safetensors"), (".pth", "torch file, weights_only")])
def test_empty_file(tmp_path, suffix, fmt):
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(b"")
    with pytest.raises(zoo.CheckpointError, match=rf"{path} \({fmt}\): the file is empty \(0 bytes\)"):
        zoo.load("ff_vit_micro", **MICRO, checkpoint=path)


def test_truncated_pth(tmp_path):
    path = tmp_path / "model.pth"
    torch.save(micro().state_dict(), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(zoo.CheckpointError, match=rf"cannot load checkpoint {path} \(torch file, weights_only\): "
                                                  rf"the file \({len(data) // 2} bytes\) is truncated"):
        zoo.load("ff_vit_micro", **MICRO, checkpoint=path)


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def test_pickled_code_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "PWNED"
    model = micro()
    path = training_checkpoint(tmp_path / "epoch_3.pth", {f"classifier.{k}": v for k, v in model.state_dict().items()})
    ckpt = torch.load(path, weights_only=False)  # written by this test
    ckpt["message_hub"]["log_scalars"]["evil"] = _Evil(marker)
    torch.save(ckpt, path)
    with pytest.raises(checkpoint.UnsafeCheckpointError) as err:
        zoo.load("ff_vit_micro", **MICRO, checkpoint=path)
    msg = str(err.value)
    assert f"{path} (torch file, weights_only): the file was refused, it pickles {os.system.__module__}.system" in msg
    assert "HistoryBuffer" not in msg.split("refused")[1].split(".")[0]  # the allowlisted globals are not blamed
    assert not marker.exists()


# -- mismatches: a few keys of each kind, with counts ------------------------------------------------------------------
def test_mismatch_lists_a_few_keys_of_each_kind_with_counts(tmp_path):
    path = tmp_path / "sa.safetensors"
    save_file(micro("sa").state_dict(), str(path))
    with pytest.raises(hub.WeightsMismatchError) as err:
        zoo.load("ea_vit_micro", **MICRO, checkpoint=path)
    msg = str(err.value)
    assert msg.startswith(f"checkpoint {path} (safetensors, zoo layout) does not fit ea_vit_micro:")
    own, theirs = set(micro("ea").state_dict()), set(micro("sa").state_dict())
    missing, unexpected = sorted(own - theirs), sorted(theirs - own)
    assert f"missing keys ({len(missing)}): {', '.join(missing[:checkpoint.SHOW_KEYS])}, ... " \
           f"({len(missing) - checkpoint.SHOW_KEYS} more)" in msg
    assert f"unexpected keys ({len(unexpected)}): {unexpected[0]}" in msg


def test_weights_of_another_architecture_are_named(tmp_path):
    zoo.save_pretrained(micro("sa"), tmp_path / "sa")  # its safetensors header names the model and task
    path = tmp_path / "sa" / "model.safetensors"
    with pytest.raises(hub.ArchitectureMismatchError) as err:
        zoo.load("ea_vit_micro", **MICRO, checkpoint=path)
    msg = str(err.value)
    assert msg.startswith(f"{path} (safetensors) holds weights of sa_vit_micro (task cls), not of ea_vit_micro (task "
                          f"cls); load it with zoo.load('sa_vit_micro', task='cls', ...).")
    assert "missing keys (" in msg and "unexpected keys (" in msg


def test_shapes_are_listed(tmp_path):
    path = tmp_path / "w.pth"
    torch.save(micro().state_dict(), path)
    with pytest.raises(zoo.CheckpointError) as err:
        zoo.load("ff_vit_micro", **{**MICRO, "num_classes": 4}, checkpoint=path)
    msg = str(err.value)
    assert f"{path} (torch file, weights_only, zoo layout) does not fit ff_vit_micro" in msg
    assert "mismatched shapes (2): head.bias: checkpoint (10,) vs model (4,), head.weight: checkpoint (10, 64) vs " \
           "model (4, 64)" in msg and "drop_head=True" in msg


# -- training checkpoints (what tools/train.py writes) ----------------------------------------------------------------
def test_training_checkpoint_of_each_task_wrapper_loads(tmp_path):
    """The zoo model's part of each task model: ``classifier.`` (cls), ``model.`` (points), the whole (seg, gen)."""
    import tasks.cls  # noqa: F401  (registers the wrappers)
    from tasks.gen.model import GANModel
    from tasks.points.models import ZooPartSegmenter
    torch.manual_seed(0)
    cls_wrapper = tasks.cls.ZooClassifier("ea_vit_micro", **MICRO)
    pseg = ZooPartSegmenter("ea_vit_micro", num_points=64, num_classes=6, num_categories=2)
    gan = GANModel("ea_vit_micro", img_size=16, out_chans=1, z_dim=8)
    seg = zoo.load("ea_vit_micro", task="seg", num_classes=3, img_size=32, patch_size=4)
    cases = [("cls", cls_wrapper, dict(**MICRO)), ("pseg", pseg, dict(num_points=64, num_classes=6, num_categories=2)),
             ("gen", gan, dict(img_size=16, out_chans=1, z_dim=8)),
             ("seg", seg, dict(num_classes=3, img_size=32, patch_size=4))]
    for task, wrapper, args in cases:
        path = training_checkpoint(tmp_path / f"{task}.pth", wrapper.state_dict())
        read = checkpoint.read(path)
        assert read.format == checkpoint.TRAINING and read.meta["iter"] == 4
        torch.manual_seed(1)
        loaded = zoo.load("ea_vit_micro", task=task, checkpoint=path, **args)
        expected = getattr(wrapper, "zoo_model", wrapper).state_dict()
        got = loaded.state_dict()
        assert got.keys() == expected.keys(), task
        assert all(torch.equal(got[k], expected[k]) for k in expected), task


def test_training_checkpoint_of_another_mixer_names_the_keys(tmp_path):
    import tasks.cls  # noqa: F401
    wrapper = tasks.cls.ZooClassifier("sa_vit_micro", **MICRO)
    path = training_checkpoint(tmp_path / "iter_4.pth", wrapper.state_dict())
    with pytest.raises(zoo.CheckpointError) as err:
        zoo.load("ea_vit_micro", checkpoint=path, **MICRO)
    msg = str(err.value)
    assert f"{path} (mmengine training checkpoint, zoo layout) does not fit ea_vit_micro" in msg
    assert "missing keys (" in msg and "blocks.0.mixer.linear_0.weight" in msg
    assert "unexpected keys (" in msg and "blocks.0.mixer.qkv.weight" in msg


def test_training_checkpoint_of_another_task_says_how_to_export(tmp_path):
    import tasks.cls  # noqa: F401
    path = training_checkpoint(tmp_path / "iter_4.pth", tasks.cls.ZooClassifier("ea_vit_micro", **MICRO).state_dict())
    with pytest.raises(zoo.CheckpointError) as err:
        zoo.load("ea_vit_micro", task="gen", img_size=16, out_chans=1, z_dim=8, checkpoint=path)
    msg = str(err.value)
    assert len(msg.splitlines()) == 1 and f"{path} (mmengine training checkpoint)" in msg
    assert "keys start with classifier." in msg and f"tools/publish.py --config CFG --checkpoint {path}" in msg
    assert "--no-upload --out DIR" in msg


def test_training_checkpoint_reads_without_mmengine(tmp_path, monkeypatch):
    """The message hub's HistoryBuffers read as inert records when mmengine is not installed."""
    model = micro()
    path = training_checkpoint(tmp_path / "iter_4.pth", {f"model.{k}": v for k, v in model.state_dict().items()})
    monkeypatch.setitem(sys.modules, "mmengine.logging", None)  # `from mmengine.logging import ...` now fails
    loaded = zoo.load("ff_vit_micro", checkpoint=path, **MICRO)
    assert torch.equal(outputs(loaded), outputs(model))
    assert checkpoint._history_buffer() is checkpoint._HistoryRecord


def test_torch_file_with_argparse_args_and_a_prefix(tmp_path):
    """A DeiT-style file (``model`` + ``args`` Namespace) and a DDP ``module.`` prefix read through the allowlist."""
    import argparse
    model = micro()
    path = tmp_path / "deit_style.pth"
    torch.save({"model": {f"module.{k}": v for k, v in model.state_dict().items()},
                "args": argparse.Namespace(lr=1e-3), "epoch": 3}, path)
    assert torch.equal(outputs(zoo.load("ff_vit_micro", checkpoint=path, **MICRO)), outputs(model))


def test_pretrained_weights_into_a_runner_model_are_checked_strictly():
    """``tools/test.py --pretrained`` copies zoo weights into the Runner's model through the same strict check."""
    from types import SimpleNamespace

    import tasks.cls  # noqa: F401
    from tasks.common.evaluate import load_zoo_weights
    runner = SimpleNamespace(model=tasks.cls.ZooClassifier("sa_vit_micro", **MICRO))
    with pytest.raises(hub.WeightsMismatchError, match=r"checkpoint --pretrained x \(zoo model\) does not fit "
                                                       r"sa_vit_micro:\n  missing keys \(\d+\): blocks.0.mixer.qkv"):
        load_zoo_weights(runner, micro("ea"), source="--pretrained x")
    weights = micro("sa", seed=3)
    load_zoo_weights(runner, weights)
    assert torch.equal(outputs(runner.model.zoo_model), outputs(weights))


def test_weights_of_another_task_are_refused_with_the_tags_that_fit():
    """A cls tag given to a seg config (``tools/test.py ... --pretrained sa_vit_micro.cls_fmnist``) names the task
    mismatch and the same model's tags for the config's task, instead of a list of missing and unexpected keys."""
    from types import SimpleNamespace

    import tasks.seg  # noqa: F401
    from tasks.common.evaluate import load_zoo_weights
    segmentor = zoo.load("sa_vit_micro.seg_scenes")
    runner = SimpleNamespace(model=segmentor)
    with pytest.raises(ValueError, match=r"--pretrained sa_vit_micro.cls_fmnist holds a 'cls' model but the config "
                                         r"builds a 'seg' one; give weights of the same task \(sa_vit_micro.seg_scenes"):
        load_zoo_weights(runner, zoo.load("sa_vit_micro.cls_fmnist"), source="--pretrained sa_vit_micro.cls_fmnist")
