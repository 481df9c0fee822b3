"""``torchrun --nproc_per_node=2 tools/train.py CONFIG --launcher pytorch`` on CPU (gloo): after training, both
ranks hold identical parameters, different from the initial ones, although each rank saw different images."""
import os
import subprocess
import sys

import torch

from test_train_cls import ROOT, tiny_config, write_fmnist

# A hook, written into the test's folder, that each rank uses to record its parameters and the images it saw.
DUMP_HOOK = '''
import json, os
import torch
from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class DumpParamsHook(Hook):
    priority = "LOWEST"

    def __init__(self, out_dir):
        self.out_dir, self.seen = out_dir, []

    def _save(self, runner, tag):
        model = runner.model.module if hasattr(runner.model, "module") else runner.model
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        torch.save(state, os.path.join(self.out_dir, f"params_rank{get_rank()}_{tag}.pt"))

    def before_train(self, runner):
        self._save(runner, "before")

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.seen += data_batch["data_samples"]["sample_idx"].tolist()

    def after_train(self, runner):
        self._save(runner, "after")
        with open(os.path.join(self.out_dir, f"seen_rank{get_rank()}.json"), "w") as f:
            json.dump(self.seen, f)
'''


def test_torchrun_two_ranks_cpu_identical_params(tmp_path):
    write_fmnist(tmp_path / "fmnist", n_train=32)
    (tmp_path / "dump_hook.py").write_text(DUMP_HOOK)
    out = tmp_path / "dumps"
    out.mkdir()
    cfg = tiny_config(tmp_path, tmp_path / "fmnist", max_iters=2, extra=f"""
custom_imports = dict(imports=['tasks.cls', 'dump_hook'], allow_failed_imports=False)
custom_hooks = [dict(type='DumpParamsHook', out_dir={str(out)!r})]
""")
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(ROOT / "tools/train.py"), str(cfg), "--launcher", "pytorch", "--work-dir", str(tmp_path / "work")]
    r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]

    load = lambda name: torch.load(out / name, weights_only=True)  # noqa: E731  (plain tensors)
    before0, before1 = load("params_rank0_before.pt"), load("params_rank1_before.pt")
    after0, after1 = load("params_rank0_after.pt"), load("params_rank1_after.pt")
    assert before0.keys() == after1.keys() and len(before0) > 10
    for k in before0:
        assert torch.equal(before0[k], before1[k]), k  # DDP starts every rank from rank 0's weights
        assert torch.equal(after0[k], after1[k]), f"{k} differs between ranks after training"
    changed = [k for k in before0 if not torch.equal(before0[k], after0[k])]
    assert len(changed) == len(before0), f"unchanged by training: {sorted(set(before0) - set(changed))}"

    import json
    seen0 = json.loads((out / "seen_rank0.json").read_text())
    seen1 = json.loads((out / "seen_rank1.json").read_text())
    assert len(seen0) == len(seen1) == 2 * 8  # 2 iterations x batch 8 per rank
    assert not set(seen0) & set(seen1)  # each rank trained on its own half of the data
