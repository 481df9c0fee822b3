"""The ``zoo`` console command: look at what the zoo holds.

    zoo list [PATTERN] [--task seg] [--pretrained]
    zoo pretrained [PATTERN] [--task seg]        # table: tag, params, dataset, metric
    zoo mixers
    zoo info ea_vit_base [--task cls]

Training, evaluation, conversion and publishing are the scripts under ``tools/`` (mmengine-based).
"""
import argparse
import json
import sys

from . import mixers, registry


def _list(args):
    names = registry.list_pretrained(args.pattern, task=args.task) if args.pretrained else \
        registry.list_models(args.pattern, task=args.task)
    print("\n".join(names) if names else "(none)")


def pretrained_table(tags):
    """Rows of ``zoo pretrained``: tag, parameters, dataset, the card's main metric and where it comes from."""
    from .cards import primary_metric
    rows = [("tag", "params", "dataset", "metric", "from")]
    for tag in tags:
        e = registry.PRETRAINED[tag]
        name, value = primary_metric(e.task, e.metrics)
        rows.append((tag, f"{e.num_params / 1e6:.2f}M" if e.num_params else "?", e.dataset_name or e.dataset or "?",
                     f"{name} {value:.4g}" if name else "?", e.metrics_source.split(" (")[0]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _pretrained(args):
    tags = registry.list_pretrained(args.pattern, task=args.task)
    print("\n".join(pretrained_table(tags)) if tags else "(none)")


def _mixers(args):
    for code, paper in mixers.list_mixers().items():
        print(f"{code:5s} {paper}")


def _info(args):
    info = registry.model_info(args.name)
    model = registry.build(args.name, task=args.task, **json.loads(args.args))
    n = sum(p.numel() for p in model.parameters())
    print(json.dumps(dict(name=args.name, task=model.zoo_config["task"], **info, **registry.ARCHS[info["arch"]][0][info["size"]],
                          params=n, paper=mixers.list_mixers()[info["mixer"]],
                          pretrained=registry.list_pretrained(f"{args.name}.*")), indent=2))


def main(argv=None):
    p = argparse.ArgumentParser(prog="zoo", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("list", help="registered model names (or pretrained tags)")
    q.add_argument("pattern", nargs="?", default=None, help="glob, e.g. 'ea_*'")
    q.add_argument("--task", default=None)
    q.add_argument("--pretrained", action="store_true", help="list pretrained tags instead")
    q.set_defaults(func=_list)
    q = sub.add_parser("pretrained", help="pretrained checkpoints as a table (tag, params, dataset, metric)")
    q.add_argument("pattern", nargs="?", default=None, help="glob, e.g. 'ea_*' or '*.seg_*'")
    q.add_argument("--task", default=None)
    q.set_defaults(func=_pretrained)
    sub.add_parser("mixers", help="mixer codes and their papers").set_defaults(func=_mixers)
    q = sub.add_parser("info", help="size, parameter count and weights of one model")
    q.add_argument("name")
    q.add_argument("--task", default="cls")
    q.add_argument("--args", default="{}", help='task arguments as JSON, e.g. \'{"img_size": 32}\'')
    q.set_defaults(func=_info)
    args = p.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, KeyError) as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
