"""Evaluate a checkpoint with an mmengine config (any task): ``python tools/test.py CONFIG CHECKPOINT [options]``.

A thin script over ``mmengine.runner.Runner`` in the style of mmsegmentation's ``tools/test.py``. ``--tta`` swaps in
the config's ``tta_pipeline`` and wraps ``model`` in its ``tta_model``, as mmsegmentation does.
"""
import argparse
import json
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # the repo root, for a checkout without install

import tasks.common as common  # noqa: E402  (registers the CPU DDP wrapper, safe loader, progress hook)
from tasks.common import cli  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Evaluate a checkpoint (mmengine Runner)")
    cli.add_common_args(parser, "test_dataloader.batch_size=64")
    parser.add_argument("checkpoint", help="checkpoint file (an mmengine .pth from tools/train.py)")
    parser.add_argument("--tta", action="store_true", help="test-time augmentation (config's tta_model/tta_pipeline)")
    parser.add_argument("--json-out", metavar="FILE", help="also write the metrics to FILE as JSON")
    return cli.parse(parser, argv)


def apply_tta(cfg):
    """Test with the config's ``tta_pipeline`` and ``tta_model`` (wrapping ``model``); a clear error if missing."""
    missing = [k for k in ("tta_model", "tta_pipeline") if cfg.get(k) is None]
    if missing:
        raise ValueError(f"--tta needs `{'` and `'.join(missing)}` in the config ({cfg.filename}); this config "
                         f"defines no test-time augmentation. Run without --tta, or add them (see mmseg's "
                         f"configs/_base_/datasets/ade20k.py for an example).")
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model
    return cfg


def jsonable(metrics):
    """Metrics as plain JSON values: evaluators may return numpy scalars (mmseg's ``IoUMetric`` does)."""
    return {k: v.item() if hasattr(v, "item") else v for k, v in metrics.items()}


def main(argv=None):
    args = parse_args(argv)
    cfg = cli.load_config(args)
    cfg.load_from = args.checkpoint
    if args.tta:
        apply_tta(cfg)
    common.init_distributed(args.launcher)
    metrics = cli.build_runner(cfg).test()
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(dict(config=args.config, checkpoint=args.checkpoint, metrics=jsonable(metrics)), f, indent=2)
    return metrics


if __name__ == "__main__":
    main()
