"""A run killed after N iterations and resumed with ``tools/train.py --resume`` ends with the same weights as an
uninterrupted run: the classifier through mmengine's advance (it replays the sampler's order; optimizer and lr
schedule resume), the scenes recipe through ``FastResumeHook`` (no batch read again, the random generators given
back: equal to the last bit, where mmengine's own resume is not)."""
import os
import shutil
import subprocess
import sys

import pytest
import torch

from test_train_cls import ROOT, tiny_config, write_fmnist
from zoo.datasets import FASHION_MNIST_ROOT

# Test-only hooks: one ends the process abruptly (os._exit: no cleanup, as a kill) right after the checkpoint
# of iteration ``at_iter`` is written; the other records which iterations a process ran.
HOOKS = '''
import os
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class ExitAfterIterHook(Hook):
    priority = "LOWEST"  # after CheckpointHook (VERY_LOW) has saved

    def __init__(self, at_iter):
        self.at_iter = at_iter

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter + 1 == self.at_iter:
            os._exit(17)


@HOOKS.register_module()
class RecordItersHook(Hook):
    def __init__(self, path):
        self.path = path

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        samples = data_batch["data_samples"] if data_batch is not None else []
        if isinstance(samples, dict):  # the classifier's collated samples
            idx = samples["sample_idx"].tolist()
        else:  # mmseg's SegDataSamples: the images' names
            idx = [os.path.basename(s.img_path) for s in samples]
        with open(self.path, "a") as f:
            f.write(f"{runner.iter} {idx}\\n")
'''


def _run(tmp_path, cfg, work, *extra):
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, str(ROOT / "tools/train.py"), str(cfg), "--work-dir", str(work), *extra],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _config(tmp_path, name, hooks):
    cfg = tiny_config(tmp_path, tmp_path / "fmnist", max_iters=8, extra=f"""
custom_imports = dict(imports=['tasks.cls', 'resume_hooks'], allow_failed_imports=False)
custom_hooks = {hooks}
default_hooks = dict(checkpoint=dict(interval=4, max_keep_ckpts=5))
""")
    return cfg.rename(tmp_path / name)


def test_killed_and_resumed_run_matches_uninterrupted(tmp_path):
    write_fmnist(tmp_path / "fmnist", n_train=20)  # batch 8, 20 images: 3 iterations per epoch, last one short
    (tmp_path / "resume_hooks.py").write_text(HOOKS)
    log_full, log_killed, log_resumed = (tmp_path / f"{n}.log" for n in ("full", "killed", "resumed"))
    full = _config(tmp_path, "full.py", f"[dict(type='RecordItersHook', path={str(log_full)!r})]")
    killed = _config(tmp_path, "killed.py", f"[dict(type='ExitAfterIterHook', at_iter=4), "
                                            f"dict(type='RecordItersHook', path={str(log_killed)!r})]")
    resumed = _config(tmp_path, "resumed.py", f"[dict(type='RecordItersHook', path={str(log_resumed)!r})]")

    r = _run(tmp_path, full, tmp_path / "work_full")
    assert r.returncode == 0, r.stderr[-3000:]
    r = _run(tmp_path, killed, tmp_path / "work_b")
    assert r.returncode == 17, r.stderr[-3000:]  # really died at iteration 4
    assert (tmp_path / "work_b/iter_4.pth").is_file() and not (tmp_path / "work_b/iter_8.pth").exists()
    r = _run(tmp_path, resumed, tmp_path / "work_b", "--resume")  # auto: the latest checkpoint of the work dir
    assert r.returncode == 0, r.stderr[-3000:]

    # The resumed process ran only iterations 4..7, on the same batches as the uninterrupted run.
    iters = lambda p: [line.split(" ", 1) for line in p.read_text().splitlines()]  # noqa: E731
    full_iters, killed_iters, resumed_iters = iters(log_full), iters(log_killed), iters(log_resumed)
    assert [int(i) for i, _ in killed_iters] == [0, 1, 2, 3]
    assert [int(i) for i, _ in resumed_iters] == [4, 5, 6, 7]
    assert killed_iters + resumed_iters == full_iters

    # Checkpoints written by this test's own runs.
    load = lambda p: torch.load(p, map_location="cpu", weights_only=False)  # noqa: E731
    a, b = load(tmp_path / "work_full/iter_8.pth"), load(tmp_path / "work_b/iter_8.pth")
    mid = load(tmp_path / "work_b/iter_4.pth")["state_dict"]
    assert a["meta"]["iter"] == b["meta"]["iter"] == 8
    for k, v in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][k], v, rtol=0, atol=1e-6, msg=k)
    assert any(not torch.equal(mid[k], v) for k, v in a["state_dict"].items())  # iterations 5..8 did change weights
    lr_a = a["optimizer"]["param_groups"][0]["lr"]
    assert lr_a == b["optimizer"]["param_groups"][0]["lr"]  # the schedule resumed too


SEG_CONFIG = ROOT / "configs/seg/upernet_sa-vit-micro-p4_1xb16-24000_fashion-scenes40k-64x64-head4to32-shift8.py"


def _seg_config(tmp_path, name, data_root, hooks, fast_resume=True):
    """The bundled scenes recipe (random shift, flip and photometric distortion: numpy's generator; dropout in both
    heads: torch's) on a few written scenes: 4 scenes a batch, 8 iterations, a checkpoint and a validation at 4."""
    cfg = tmp_path / name
    cfg.write_text(f"""
_base_ = [{str(SEG_CONFIG)!r}]
custom_imports = dict(imports=['tasks.seg', 'resume_hooks'], allow_failed_imports=False)
model = dict(backbone=dict(init_cfg=None))
train_dataloader = dict(batch_size=4, dataset=dict(data_root={str(data_root)!r}))
val_dataloader = dict(dataset=dict(data_root={str(data_root)!r}))
test_dataloader = val_dataloader
max_iters = 8
param_scheduler = [dict(type='PolyLR', eta_min=0.0, power=1.0, begin=0, end=max_iters, by_epoch=False)]
train_cfg = dict(max_iters=max_iters, val_interval=4)
default_hooks = dict(checkpoint=dict(interval=4, max_keep_ckpts=5, save_best='mIoU', rule='greater'),
                     logger=dict(interval=1), fast_resume=dict(enabled={fast_resume}))
custom_hooks = {hooks}
""")
    return cfg


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")
def test_resumed_seg_run_skips_the_trained_batches_and_repeats_the_run_exactly(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    from make_scenes import make_scenes
    data = tmp_path / "scenes"
    make_scenes(data, seed=3, num_train=24, num_val=4, size=64)
    (tmp_path / "resume_hooks.py").write_text(HOOKS)
    logs = {n: tmp_path / f"{n}.log" for n in ("full", "killed", "resumed", "stock")}
    record = lambda n: f"dict(type='RecordItersHook', path={str(logs[n])!r})"  # noqa: E731
    full = _seg_config(tmp_path, "full.py", data, f"[{record('full')}]")
    killed = _seg_config(tmp_path, "killed.py", data,
                         f"[dict(type='ExitAfterIterHook', at_iter=4), {record('killed')}]")
    resumed = _seg_config(tmp_path, "resumed.py", data, f"[{record('resumed')}]")
    stock = _seg_config(tmp_path, "stock.py", data, f"[{record('stock')}]", fast_resume=False)

    r = _run(tmp_path, full, tmp_path / "work_full")
    assert r.returncode == 0, r.stderr[-3000:]
    r = _run(tmp_path, killed, tmp_path / "work_b")
    assert r.returncode == 17, r.stderr[-3000:]
    load = lambda p: torch.load(p, map_location="cpu", weights_only=False)  # noqa: E731
    ckpt = load(tmp_path / "work_b/iter_4.pth")
    assert set(ckpt["meta"]["rng_state"]) == {"torch", "numpy", "python", "after_validation"}
    assert ckpt["meta"]["rng_state"]["after_validation"] is False  # written before the validation of iteration 4
    shutil.copytree(tmp_path / "work_b", tmp_path / "work_stock")
    r = _run(tmp_path, resumed, tmp_path / "work_b", "--resume")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "FastResumeHook: skipping the sampler past 4 batches without reading them" in out
    # the best checkpoint is written after the validation of iteration 4: its states include that validation's
    # draw (it holds no optimizer state, so mmengine cannot resume it exactly anyway)
    assert load(tmp_path / "work_full/best_mIoU_iter_4.pth")["meta"]["rng_state"]["after_validation"] is True
    r = _run(tmp_path, stock, tmp_path / "work_stock", "--resume")  # mmengine's own resume, for contrast
    assert r.returncode == 0, r.stderr[-3000:]
    assert "FastResumeHook: " not in r.stdout + r.stderr

    # Both resumes train on the uninterrupted run's batches (mmengine's by reading them all again) ...
    iters = lambda n: logs[n].read_text().splitlines()  # noqa: E731
    assert iters("killed") + iters("resumed") == iters("full") == iters("killed") + iters("stock")
    a, b, c = (load(tmp_path / f"{w}/iter_8.pth")["state_dict"] for w in ("work_full", "work_b", "work_stock"))
    # ... but only this one draws the same augmentations and dropout masks: the same weights to the last bit
    assert all(torch.equal(b[k], v) for k, v in a.items())
    assert not all(torch.equal(c[k], v) for k, v in a.items())  # mmengine's: torch's generator restarts at the seed


def test_generator_states_round_trip_through_a_weights_only_checkpoint(tmp_path):
    import random

    import numpy as np

    from tasks.common.hooks import rng_state, set_rng_state
    from zoo.checkpoint import load_torch
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    np.random.randn()  # numpy's legacy normal draws in pairs: one is now cached (has_gauss)
    torch.save(dict(meta=dict(rng_state=rng_state())), tmp_path / "c.pth")
    draw = lambda: (torch.rand(4).tolist(), np.random.randn(3).tolist(), random.random())  # noqa: E731
    first = draw()
    set_rng_state(load_torch(str(tmp_path / "c.pth"))["meta"]["rng_state"])  # the zoo's weights_only reader
    assert draw() == first


def test_fast_resume_says_why_it_leaves_mmengines_advance_alone(monkeypatch):
    from types import SimpleNamespace

    from mmengine.dataset import DefaultSampler, InfiniteSampler
    from torch.utils.data import DataLoader

    import tasks.common.hooks as H
    hook, data = H.FastResumeHook(), list(range(8))

    def loop(**kw):
        loader = DataLoader(data, batch_size=2, **kw)
        return SimpleNamespace(dataloader=loader, dataloader_iterator=SimpleNamespace(_iterator=iter(loader)))
    infinite = dict(sampler=InfiniteSampler(data, seed=0))
    assert hook._why_not(loop(**infinite), {"torch": None}) is None
    assert "no generator states" in hook._why_not(loop(**infinite), None)
    assert "worker processes" in hook._why_not(loop(num_workers=1, **infinite), {})
    assert "not an InfiniteSampler" in hook._why_not(loop(sampler=DefaultSampler(data, seed=0)), {})
    monkeypatch.setattr(H, "get_world_size", lambda: 2)
    assert "several processes" in hook._why_not(loop(**infinite), {})
