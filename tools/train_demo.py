"""``make demo-train``: train every ``*_vit_micro`` on Fashion-MNIST for a fixed budget and compare the mixers.

Each mixer trains through its config (``configs/cls/{mixer}-vit-micro-p4_1xb128-300it_fmnist-28.py``) and
mmengine's Runner, exactly as ``tools/train.py`` would, then is tested on the 10,000 t10k images. The table shows
top-1 / top-5 on t10k and the training throughput, the first iterations excluded: images per second of wall time,
and images per second of the process's CPU time (all threads), which other jobs on a shared machine disturb much
less::

    python tools/train_demo.py                 # all four mixers, the configs' budget (300 iterations each)
    python tools/train_demo.py --mixers sa ff --iters 100
"""
import argparse
import json
import os
import os.path as osp
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

from mmengine.config import Config  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

import tasks.common  # noqa: E402,F401  (registers the progress hook, safe loader, CPU DDP wrapper)

CONFIG = osp.join(ROOT, "configs/cls/{mixer}-vit-micro-p4_1xb128-300it_fmnist-28.py")
MIXERS = ("sa", "ea", "effa", "ff")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mixers", nargs="+", default=list(MIXERS), choices=MIXERS)
    parser.add_argument("--iters", type=int, default=None, help="training iterations per mixer (default: config's)")
    parser.add_argument("--test-samples", type=int, default=None, help="evaluate on the first N t10k images only")
    parser.add_argument("--work-dir", default=osp.join("work_dirs", "demo"))
    parser.add_argument("--verbose", action="store_true", help="show mmengine's INFO log")
    return parser.parse_args(argv)


def demo_cfg(mixer, args):
    """The mixer's micro config with the demo's adjustments: no mid-run validation, one checkpoint at the end."""
    cfg = Config.fromfile(CONFIG.format(mixer=mixer))
    iters = args.iters or cfg.train_cfg.max_iters
    if args.iters is not None:  # rescale the schedule to the new budget
        warm = max(1, iters // 10)
        cfg.train_cfg.max_iters = iters
        cfg.param_scheduler[0].end = warm
        cfg.param_scheduler[1].update(begin=warm, end=iters, T_max=iters - warm)
    cfg.train_cfg.val_interval = iters + 1
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint.interval = iters
    if args.test_samples:
        cfg.test_dataloader.dataset.max_samples = args.test_samples
    cfg.work_dir = osp.join(args.work_dir, mixer)
    cfg.experiment_name = f"demo_{mixer}_{time.strftime('%Y%m%d_%H%M%S')}"
    cfg.visualizer.name = f"visualizer_{cfg.experiment_name}"  # one Runner per mixer in this process
    if not args.verbose:
        cfg.log_level = "WARNING"
    return cfg, iters


def main(argv=None):
    args = parse_args(argv)
    rows = []
    for mixer in args.mixers:
        cfg, iters = demo_cfg(mixer, args)
        print(f"== {cfg.model.name}: {iters} iterations x batch {cfg.train_dataloader.batch_size} on Fashion-MNIST",
              flush=True)
        runner = Runner.from_cfg(cfg)
        t0 = time.perf_counter()
        runner.train()
        train_s = time.perf_counter() - t0
        metrics = runner.test()
        model = runner.model.module if hasattr(runner.model, "module") else runner.model
        rows.append(dict(mixer=mixer, model=cfg.model.name, params=sum(p.numel() for p in model.parameters()),
                         iters=iters, train_s=round(train_s, 1),
                         images_per_s=round(float(runner.message_hub.get_info("train_images_per_s", 0.0)), 1),
                         images_per_cpu_s=round(float(runner.message_hub.get_info("train_images_per_cpu_s", 0.0)), 1),
                         top1=round(metrics["top1"], 2), top5=round(metrics["top5"], 2)))
    header = ("mixer", "model", "params", "iters", "train s", "train img/s", "train img/CPU-s", "t10k top-1 %",
              "t10k top-5 %")
    keys = ("mixer", "model", "params", "iters", "train_s", "images_per_s", "images_per_cpu_s", "top1", "top5")
    table = [header] + [tuple(str(r[k]) for k in keys) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in table]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    print("\n" + "\n".join(lines))
    os.makedirs(args.work_dir, exist_ok=True)
    with open(osp.join(args.work_dir, "demo_results.json"), "w") as f:
        json.dump(rows, f, indent=2)
    return rows


if __name__ == "__main__":
    main()
