"""Train a model from an mmengine config (any task): ``python tools/train.py CONFIG [options]``.

A thin script over ``mmengine.runner.Runner`` in the style of mmsegmentation's ``tools/train.py``. Distributed::

    torchrun --nproc_per_node=2 tools/train.py CONFIG --launcher pytorch

works on GPUs (NCCL) and on CPU (gloo; see ``tasks.common.runtime``).
"""
import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # the repo root, for a checkout without install

from mmengine.config import Config, DictAction  # noqa: E402
from mmengine.registry import RUNNERS  # noqa: E402
from mmengine.runner import Runner  # noqa: E402

import tasks.common as common  # noqa: E402  (registers the CPU DDP wrapper, safe loader, progress hook)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Train a model (mmengine Runner)")
    parser.add_argument("config", help="config file path")
    parser.add_argument("--work-dir", help="where logs and checkpoints go (default: ./work_dirs/<config name>)")
    parser.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                        help="resume training from the work dir's latest checkpoint (no value) or from CHECKPOINT")
    parser.add_argument("--amp", action="store_true",
                        help="mixed precision (float16 with loss scaling on CUDA, bfloat16 autocast on CPU)")
    parser.add_argument("--auto-scale-lr", action="store_true",
                        help="scale the lr linearly by total batch / auto_scale_lr.base_batch_size")
    parser.add_argument("--cfg-options", nargs="+", action=DictAction,
                        help="override config entries, e.g. train_cfg.max_iters=100 'model.name=ea_vit_micro'")
    parser.add_argument("--launcher", choices=["none", "pytorch", "slurm", "mpi"], default="none",
                        help="job launcher (pytorch: started by torchrun)")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = str(args.local_rank)
    return args


def build_cfg(args):
    """Load the config and apply the command line (shared with tools/demo.py)."""
    cfg = Config.fromfile(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get("work_dir") is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(args.config))[0])
    if args.amp:
        common.use_amp(cfg)
    if args.resume == "auto":
        cfg.resume, cfg.load_from = True, None  # the Runner picks work_dir/last_checkpoint
    elif args.resume is not None:
        cfg.resume, cfg.load_from = True, args.resume
    if args.auto_scale_lr:
        if "auto_scale_lr" not in cfg or "base_batch_size" not in cfg.auto_scale_lr:
            raise ValueError("--auto-scale-lr needs `auto_scale_lr = dict(base_batch_size=...)` in the config")
        cfg.auto_scale_lr.enable = True
    return cfg


def main(argv=None):
    args = parse_args(argv)
    cfg = build_cfg(args)
    common.init_distributed(args.launcher)
    runner = Runner.from_cfg(cfg) if "runner_type" not in cfg else RUNNERS.build(cfg)
    runner.train()


if __name__ == "__main__":
    main()
