"""A run killed after N iterations and resumed with ``tools/train.py --resume`` ends with the same weights as an
uninterrupted run (mmengine's IterBasedTrainLoop replays the sampler's order; optimizer and lr schedule resume)."""
import os
import subprocess
import sys

import torch

from test_train_cls import ROOT, tiny_config, write_fmnist

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
        idx = data_batch["data_samples"]["sample_idx"].tolist() if data_batch is not None else []
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
