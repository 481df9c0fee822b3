"""Command-line pieces shared by ``tools/train.py`` and ``tools/test.py``."""
import argparse
import os
import os.path as osp

from mmengine.config import Config, DictAction


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
    if "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = str(args.local_rank)
    return args


def load_config(args):
    """The config with the command line applied (launcher, ``--cfg-options``, work dir)."""
    cfg = Config.fromfile(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
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
