"""Command-line pieces shared by ``tools/train.py`` and ``tools/test.py``.

A ``--cfg-options`` that changes the run length (``train_cfg.max_iters`` or ``train_cfg.max_epochs``) also rescales the
learning-rate schedule onto the new length (``scale_schedule``): ``begin``/``end``/``T_max``/``milestones`` of every
``param_scheduler`` are multiplied by new/old, so ``train_cfg.max_iters=1600`` on a 160k recipe runs the same
warm-up-then-decay curve, compressed 100x, and ends at the recipe's final learning rate. Passing any
``param_scheduler...`` option as well keeps the schedule exactly as given.
"""
import argparse
import os
import os.path as osp
import sys

from mmengine.config import Config, DictAction
from mmengine.optim.scheduler.param_scheduler import INF


def add_common_args(parser, cfg_options_example):
    """Add the arguments both tools take: config, ``--work-dir``, ``--cfg-options``, ``--launcher``."""
    parser.add_argument("config", help="config file path")
    parser.add_argument("--work-dir", help="where logs (and checkpoints) go (default: ./work_dirs/<config name>)")
    parser.add_argument("--cfg-options", nargs="+", action=DictAction,
                        help=f"override config entries, e.g. {cfg_options_example}")
    parser.add_argument("--launcher", choices=["none", "pytorch", "slurm", "mpi"], default="none",
                        help="job launcher (pytorch: started by torchrun)")
    parser.add_argument("--local_rank", "--local-rank", type=int, default=0, help=argparse.SUPPRESS)


def parse(parser, argv=None):
    """Parse, and export LOCAL_RANK for launchers that pass it as an argument."""
    args = parser.parse_args(argv)
    if not osp.isfile(args.config):
        parser.error(f"config {args.config} not found{_close_configs(args.config)}")
    if "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = str(args.local_rank)
    return args


def _close_configs(path):
    """The repository's configs whose names are close to ``path``'s, as an error message's tail ('' if none)."""
    import difflib
    import glob
    root = osp.join(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))), "configs")
    known = {osp.basename(f): osp.relpath(f) for f in glob.glob(osp.join(root, "**", "*.py"), recursive=True)
             if not any(part.startswith("_") for part in osp.relpath(f, root).split(os.sep))}
    close = difflib.get_close_matches(osp.basename(path), list(known), n=3, cutoff=0.6)
    return f"; close matches: {', '.join(known[c] for c in close)}" if close else ""


_LENGTH_KEYS = ("train_cfg.max_iters", "train_cfg.max_epochs")
_STEP_FIELDS = ("begin", "end")


def _scale_one(sched, ratio):
    """Rescale one scheduler dict in place (see ``scale_schedule``)."""
    # Epoch values converted to iterations by mmengine may stay fractional (it multiplies by the epoch length);
    # everything else counts whole steps, and a phase never shrinks to nothing (mmengine refuses end <= begin).
    exact = sched.get("by_epoch", True) and sched.get("convert_to_iter_based", False)
    fit = (lambda v: v * ratio) if exact else (lambda v: int(round(v * ratio)))
    old = {k: sched[k] for k in _STEP_FIELDS if sched.get(k) is not None and sched[k] < INF}  # INF: open-ended
    new = {k: fit(v) for k, v in old.items()}
    if "begin" in new and "end" in new and new["end"] <= new["begin"]:  # only after rounding
        new["end"] = new["begin"] + 1
    if sched.get("T_max") is not None:
        spans_phase = "end" in old and sched["T_max"] == old["end"] - old.get("begin", 0)
        new["T_max"] = new["end"] - new.get("begin", 0) if spans_phase else max(fit(sched["T_max"]), 1)
    if sched.get("milestones") is not None:
        new["milestones"] = [fit(m) for m in sched["milestones"]]
    sched.update(new)


def scale_schedule(cfg, old_length, new_length):
    """Rescale ``cfg.param_scheduler`` from a run of ``old_length`` to one of ``new_length`` (same unit).

    Every scheduler's ``begin``, ``end``, ``T_max`` and ``milestones`` are multiplied by ``new_length / old_length``
    (rounded to whole steps except for epoch-based schedulers with ``convert_to_iter_based``, which mmengine turns
    into iterations itself). A ``T_max`` equal to its phase length stays equal to the rescaled phase. Open-ended
    schedulers (no ``end``) already follow the run length and are left alone.

    Args:
        cfg: An mmengine ``Config``; ``param_scheduler`` may be a dict, a list, or a dict of lists (one per
            optimizer, e.g. a GAN's generator and discriminator).
        old_length: The config's ``max_iters`` / ``max_epochs``.
        new_length: The value given on the command line.

    Returns:
        The number of schedulers rescaled.
    """
    scheds = cfg.get("param_scheduler")
    if not scheds or old_length == new_length:
        return 0
    if isinstance(scheds, dict) and "type" not in scheds:  # one list per optimizer
        groups = list(scheds.values())
    else:
        groups = [scheds]
    flat = [s for g in groups for s in (g if isinstance(g, (list, tuple)) else [g])]
    for sched in flat:
        _scale_one(sched, new_length / old_length)
    return len(flat)


def _rescale_for_length_options(cfg, old_train_cfg, cfg_options):
    """Apply ``scale_schedule`` when the options change the run length but leave the schedule alone."""
    if any(k == "param_scheduler" or k.startswith("param_scheduler.") for k in cfg_options):
        return
    for key in _LENGTH_KEYS:
        if key not in cfg_options:
            continue
        old, new = old_train_cfg.get(key.split(".", 1)[1]), cfg_options[key]
        if old is None or new is None or old == new:
            continue
        n = scale_schedule(cfg, old, new)
        if n:
            print(f"--cfg-options {key}={new} (config: {old}): rescaled the {n} param_scheduler entr"
                  f"{'y' if n == 1 else 'ies'} by {new}/{old}; pass a param_scheduler option to keep them as given.",
                  file=sys.stderr)


def load_config(args):
    """The config with the command line applied (launcher, ``--cfg-options``, work dir).

    A run length changed through ``--cfg-options`` rescales the LR schedule with it (see the module docstring).
    """
    cfg = Config.fromfile(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        old_train_cfg = dict(cfg.get("train_cfg") or {})
        cfg.merge_from_dict(args.cfg_options)
        _rescale_for_length_options(cfg, old_train_cfg, args.cfg_options)
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get("work_dir") is None:
        cfg.work_dir = osp.join("./work_dirs", osp.splitext(osp.basename(args.config))[0])
    return cfg


def build_runner(cfg):
    """mmengine's Runner, or the config's own ``runner_type``."""
    from mmengine.registry import RUNNERS
    from mmengine.runner import Runner
    return Runner.from_cfg(cfg) if "runner_type" not in cfg else RUNNERS.build(cfg)
