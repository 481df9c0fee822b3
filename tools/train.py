"""Train a model from an mmengine config (any task): ``python tools/train.py CONFIG [options]``.

A thin script over ``mmengine.runner.Runner`` in the style of mmsegmentation's ``tools/train.py``. Distributed::

    torchrun --nproc_per_node=2 tools/train.py CONFIG --launcher pytorch

works on GPUs (NCCL) and on CPU (gloo; see ``tasks.common.runtime``).
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # the repo root, for a checkout without install

import tasks.common as common  # noqa: E402  (registers the CPU DDP wrapper, safe loader, progress hook)
from tasks.common import cli, finetune  # noqa: E402
from zoo import CheckpointError  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Train a model (mmengine Runner)")
    cli.add_common_args(parser, "train_cfg.max_iters=100 'model.name=ea_vit_micro'")
    parser.add_argument("--resume", nargs="?", const="auto", default=None, metavar="CHECKPOINT",
                        help="resume training: from the latest checkpoint in the work dir (no value) or from CHECKPOINT")
    parser.add_argument("--pretrained", metavar="WEIGHTS",
                        help="start from zoo weights (a tag, hf-hub:org/name or local-dir:/path), adapted to the "
                             "config's num_classes, channels and crop where zoo.adapt can; strict otherwise. "
                             "A config can say the same with load_from='zoo:WEIGHTS'; this flag replaces it")
    parser.add_argument("--amp", action="store_true",
                        help="mixed precision (float16 with loss scaling on CUDA, bfloat16 autocast on a CPU with "
                             "native bf16; on a CPU without it, a warning and float32: zoo/cpu.py)")
    parser.add_argument("--auto-scale-lr", action="store_true",
                        help="scale the lr linearly by total batch / auto_scale_lr.base_batch_size")
    return cli.parse(parser, argv)


def build_cfg(args):
    """Load the config and apply the command line (shared with tools/demo.py)."""
    cfg = cli.load_config(args)
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
    weights = finetune.weights_to_start_from(cfg, args.pretrained)
    with common.distributed(args.launcher):
        _train(cfg, weights)  # the Runner is unreferenced when the block closes the process group


def _train(cfg, weights):
    runner = cli.build_runner(cfg)
    if weights:  # loaded weights mark the modules initialised: the Runner's init_weights keeps them
        try:
            finetune.start_from(runner, weights)
        except (CheckpointError, ValueError) as e:  # weights of another task or mixer: one line, not a traceback
            raise SystemExit(f"tools/train.py: error: {e}") from e
    runner.train()


if __name__ == "__main__":
    main()
