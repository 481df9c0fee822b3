"""Compare the mixers' GANs under one fixed CPU budget on Fashion-MNIST-32 (the table in docs/generation.md).

For each mixer: score the generator at initialisation, train the micro config until ``--seconds`` of process CPU
time are spent (``TrainTimeBudgetHook``, one thread), score the resulting checkpoint with ``tools/test.py``
(FID/KID/IS with the fmnist-clf network against ``--eval-samples`` t10k images), and print a Markdown table::

    OMP_NUM_THREADS=1 python -m tasks.gen.budget_run --seconds 150 --work-dir work_dirs/gen_budget
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = "configs/gen/sagan_{}-vit-micro_1xb32-2k_fmnist-32x32.py"


def _run(cmd):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mixers", nargs="+", default=["sa", "ea", "effa", "ff"])
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--eval-samples", type=int, default=2000)
    ap.add_argument("--work-dir", default="work_dirs/gen_budget")
    args = ap.parse_args(argv)
    py = sys.executable
    eval_opts = [f"test_dataloader.dataset.max_samples={args.eval_samples}"]
    rows = []
    for m in args.mixers:
        cfg, work = CONFIG.format(m), os.path.join(args.work_dir, m)
        os.makedirs(work, exist_ok=True)
        init = os.path.join(work, "init.pth")
        _run([py, "-c", "import sys, torch; sys.path.insert(0, '.'); import tasks.gen; "
              "from mmengine.config import Config; from mmengine.registry import MODELS; "
              "from mmengine.runner import save_checkpoint; torch.manual_seed(0); "
              f"save_checkpoint(MODELS.build(Config.fromfile('{cfg}').model).state_dict(), '{init}')"])
        _run([py, "tools/test.py", cfg, init, "--work-dir", os.path.join(work, "test_init"),
              "--json-out", os.path.join(work, "init.json"), "--cfg-options", *eval_opts])
        _run([py, "tools/train.py", cfg, "--work-dir", work, "--cfg-options", f"custom_hooks.0.seconds={args.seconds}",
              "train_cfg.val_interval=1000000", "default_hooks.checkpoint.interval=1000000"])
        with open(os.path.join(work, "last_checkpoint")) as f:
            ckpt = f.read().strip()
        _run([py, "tools/test.py", cfg, ckpt, "--work-dir", os.path.join(work, "test"),
              "--json-out", os.path.join(work, "trained.json"), "--cfg-options", *eval_opts])
        with open(os.path.join(work, "init.json")) as f:
            before = json.load(f)["metrics"]
        with open(os.path.join(work, "trained.json")) as f:
            after = json.load(f)["metrics"]
        iters = int(os.path.basename(ckpt).split("_")[1].split(".")[0])
        rows.append((m, iters, before["FID(fmnist-clf)"], after["FID(fmnist-clf)"], after["KID(fmnist-clf)"],
                     after["IS(fmnist-clf)"]))
    print("\n| mixer | iterations in budget | FID(fmnist-clf) at init | FID(fmnist-clf) | KID(fmnist-clf) | "
          "IS(fmnist-clf) |\n|---|---|---|---|---|---|")
    for m, it, b, a, k, s in rows:
        print(f"| {m} | {it} | {b:.1f} | {a:.1f} | {k:.3f} | {s:.2f} |")
    with open(os.path.join(args.work_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
