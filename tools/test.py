"""Evaluate a checkpoint with an mmengine config (any task): ``python tools/test.py CONFIG CHECKPOINT [options]``.

``--pretrained WEIGHTS`` evaluates zoo weights instead of a training checkpoint: a registered tag (the bundled
``ea_vit_micro.seg_scenes``, or an upstream one such as ``sa_vit_base.seg_ade20k``, downloaded and converted), or a
published folder (``hf-hub:org/name``, ``local-dir:/path``). With ADE20K on disk, mmseg's reported number is one
command: ``python tools/test.py configs/seg/upernet_sa-vit-base_8xb2-160k_ade20k-512x512.py --pretrained
sa_vit_base.seg_ade20k``.

A thin script over ``mmengine.runner.Runner`` in the style of mmsegmentation's ``tools/test.py``. ``--tta`` swaps in
the config's ``tta_pipeline`` and wraps ``model`` in its ``tta_model``, as mmsegmentation does. ``--int8`` scores
the model with its linears in int8 (``zoo.cpu.int8_dynamic``, the fast path of a CPU without native bf16), so
what that path costs is one command: ``python tools/test.py CONFIG --pretrained ea_vit_micro.seg_scenes --int8``.

The checkpoint is read and checked by the zoo's one checkpoint layer (``tasks.common.checkpoint.load_strict`` over
``zoo.checkpoint``; mmengine's ``load_from`` is not strict): one of another mixer, size or task stops with the
missing and unexpected keys instead of scoring a half-random model. A
missing checkpoint or ``--json-out`` folder stops before anything is built.
"""
import argparse
import json
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # the repo root, for a checkout without install

import tasks.common as common  # noqa: E402  (registers the CPU DDP wrapper, safe loader, progress hook)
from tasks.common import cli  # noqa: E402
from tasks.common.checkpoint import load_strict  # noqa: E402
from tasks.common.evaluate import adopt_refine, load_zoo_weights, plain_metrics, zoo_model_of  # noqa: E402
from zoo import CheckpointError  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Evaluate a checkpoint (mmengine Runner)")
    cli.add_common_args(parser, "test_dataloader.batch_size=64")
    parser.add_argument("checkpoint", nargs="?", help="checkpoint file (an mmengine .pth from tools/train.py)")
    parser.add_argument("--pretrained", metavar="WEIGHTS",
                        help="zoo weights instead of a checkpoint: a tag, hf-hub:org/name or local-dir:/path")
    parser.add_argument("--tta", action="store_true", help="test-time augmentation (config's tta_model/tta_pipeline)")
    parser.add_argument("--json-out", metavar="FILE",
                        help="also write the metrics to FILE as JSON, with the config, weights, --tta, --int8 and "
                             "--cfg-options they were obtained with")
    parser.add_argument("--int8", action="store_true",
                        help="test with int8 linears (zoo.cpu.int8_dynamic; CPU only): what the fast path costs")
    return cli.parse(parser, argv)


def apply_tta(cfg):
    """Test with the config's ``tta_pipeline`` and ``tta_model`` (wrapping ``model``); a clear error if missing."""
    missing = [k for k in ("tta_model", "tta_pipeline") if cfg.get(k) is None]
    if missing:
        raise ValueError(f"--tta needs `{'` and `'.join(missing)}` in the config ({cfg.filename}); this config "
                         f"defines no test-time augmentation. Run without --tta, or add them (see mmseg's "
                         f"configs/_base_/datasets/ade20k.py for an example).")
    cfg.test_dataloader.dataset.pipeline = cfg.tta_pipeline
    if cfg.model.get("test_cfg", {}).get("return_logits") is False:  # seg: the TTA wrapper merges each view's logits
        cfg.model.test_cfg.return_logits = True
    cfg.tta_model.module = cfg.model
    cfg.model = cfg.tta_model
    return cfg


def check_paths(args):
    """Fail before building anything when the checkpoint is missing or the ``--json-out`` folder does not exist."""
    if (args.checkpoint is None) == (args.pretrained is None):
        raise SystemExit("tools/test.py: error: give a CHECKPOINT or --pretrained WEIGHTS (one of them)")
    if args.checkpoint is not None and not osp.isfile(args.checkpoint):
        raise SystemExit(f"tools/test.py: error: checkpoint {args.checkpoint} not found")
    if args.json_out:
        folder = osp.dirname(osp.abspath(args.json_out))
        if not osp.isdir(folder):
            raise SystemExit(f"tools/test.py: error: --json-out {args.json_out}: folder {folder} does not exist; "
                             f"create it first (mkdir -p {folder}) or write elsewhere.")
        if not os.access(folder, os.W_OK):
            raise SystemExit(f"tools/test.py: error: --json-out {args.json_out}: folder {folder} is not writable.")


def main(argv=None):
    args = parse_args(argv)
    check_paths(args)
    cfg = cli.load_config(args)
    cfg.load_from = None  # loaded strictly below, not by the Runner (whose load_from ignores mismatched keys)
    if args.tta:
        apply_tta(cfg)
    weights = _zoo_weights(args, cfg)
    with common.distributed(args.launcher):
        metrics = _test(args, cli.build_runner(cfg), weights)
    if args.json_out:
        # how the numbers were obtained travels with them: an int8 or TTA score is not the card's single-scale one
        record = dict(config=args.config, checkpoint=args.checkpoint or args.pretrained, tta=args.tta, int8=args.int8)
        if args.cfg_options:
            record["cfg_options"] = args.cfg_options
        with open(args.json_out, "w") as f:
            json.dump(dict(record, metrics=plain_metrics(metrics)), f, indent=2, default=str)
    return metrics


def _zoo_weights(args, cfg):
    """The model of ``--pretrained`` (None without it); a segmentor's affinity refinement goes into ``cfg``'s model
    (``adopt_refine``): it is the folder's, trained after the recipe that the config describes."""
    if not args.pretrained:
        return None
    import zoo
    try:
        model = zoo.load(args.pretrained)
    except (CheckpointError, ValueError) as e:
        raise SystemExit(f"tools/test.py: error: {e}") from e
    adopt_refine(cfg, model)
    return model


def _test(args, runner, weights=None):
    """Load the weights the command line names (``weights``: the ``--pretrained`` model) into ``runner``'s model and
    run its test loop."""
    try:
        if args.pretrained:
            load_zoo_weights(runner, weights, source=f"--pretrained {args.pretrained}")
        else:
            load_strict(runner, args.checkpoint)
        if args.int8:
            from zoo import cpu
            cpu.int8_dynamic(zoo_model_of(runner, "--int8").eval(), inplace=True)
    except (CheckpointError, ValueError) as e:
        raise SystemExit(f"tools/test.py: error: {e}") from e
    return runner.test()


if __name__ == "__main__":
    main()
