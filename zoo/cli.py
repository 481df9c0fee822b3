"""The ``zoo`` console command: look at what the zoo holds.

    zoo list [PATTERN] [--task seg] [--pretrained]
    zoo pretrained [PATTERN] [--task seg]        # table: tag, params, dataset, metric
    zoo mixers
    zoo info ea_vit_base [--task cls]
    zoo info ea_vit_micro.seg_scenes             # a tag: also its entry (dataset, metrics, source)
    zoo predict sa_vit_micro.cls_fmnist shirt.png [--top 5]      # classes and probabilities
    zoo predict ea_vit_micro.seg_scenes scene.jpg --out labels/   # label maps as palette PNGs

Training, evaluation, conversion and publishing are the scripts under ``tools/`` (mmengine-based).
"""
import argparse
import json
import os
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
    """A model name: its architecture (built for ``--task`` with ``--args``; ``params`` counts the built model). A
    pretrained tag: the same for the architecture the weights need, plus the tag's entry (``PretrainedCfg``: dataset,
    metrics, source, Hub id, ...; its ``num_params`` counts the published weights); nothing is downloaded."""
    entry = None
    if "." in args.name:  # a tag, e.g. ea_vit_micro.seg_scenes
        entry = registry.pretrained_cfg(args.name)
        if args.task is not None and registry.resolve_task(args.task) != entry.task:
            raise ValueError(f"{entry.tag} holds {entry.task} weights, not {args.task}; drop --task")
        name, task, kwargs = entry.model, entry.task, {**entry.args, **json.loads(args.args)}
    else:
        name, task, kwargs = args.name, args.task or "cls", json.loads(args.args)
    info = registry.model_info(name)
    model = registry.build(name, task=task, **kwargs)
    n = sum(p.numel() for p in model.parameters())
    out = dict(name=name, task=model.zoo_config["task"], **info, **registry.ARCHS[info["arch"]][0][info["size"]],
               params=n, paper=mixers.list_mixers()[info["mixer"]], pretrained=registry.list_pretrained(f"{name}.*"))
    if entry is not None:  # its num_params counts the published weights (a GAN's: the EMA generator's)
        out["pretrained_cfg"] = entry.to_dict()
    print(json.dumps(out, indent=2))


def _predict(args):
    """Run a pretrained checkpoint on image files: top classes (cls) or label-map PNGs in ``--out`` (seg)."""
    import numpy as np
    import torch
    from PIL import Image

    from . import data, factory
    from .layers.resize_argmax import resize_argmax
    _check_images(args.images)
    model = factory.load(args.tag).eval()
    cfg = data.resolve_data_config(model)
    names = model.pretrained_cfg.get("label_names") or []
    if cfg["task"] == "seg":
        if not args.out:
            raise ValueError("a segmentor writes label maps: give --out DIR")
        targets = [os.path.join(args.out, os.path.splitext(os.path.basename(f))[0] + ".png") for f in args.images]
        taken = [t for t in targets if os.path.exists(t)] if not args.overwrite else []
        if taken or len(set(targets)) < len(targets):
            raise ValueError(f"label maps would overwrite {', '.join(taken) or 'each other (same file names)'}; "
                             f"choose another --out or pass --overwrite")
        os.makedirs(args.out, exist_ok=True)
    for i, path in enumerate(args.images):
        with Image.open(path) as img:
            img.load()
            x = data.preprocess(img, cfg)
            size = (img.height, img.width)
        with torch.no_grad():
            out = model(x)
        if cfg["task"] == "cls":
            probs = out.softmax(-1)[0]
            top = probs.topk(min(args.top, probs.numel()))
            print(f"{path}: " + ", ".join(f"{names[k] if k < len(names) else k} {100 * float(p):.1f}%"
                                          for p, k in zip(top.values, top.indices.tolist())))
            continue
        labels = resize_argmax(out, size, getattr(model, "align_corners", False))[0].numpy().astype(np.uint8)
        png = Image.fromarray(labels, mode="P")
        png.putpalette(_palette(int(out.shape[1])))
        png.save(targets[i])
        share = np.bincount(labels.ravel(), minlength=out.shape[1]) / labels.size
        order = np.argsort(-share)[:args.top]
        print(f"{path} -> {targets[i]}: " + ", ".join(
            f"{names[k] if k < len(names) else k} {100 * share[k]:.1f}%" for k in order if share[k] > 0))


def _check_images(paths):
    """Refuse the whole run, before a model is loaded or a label map written, if any file is missing or unreadable."""
    from PIL import Image, UnidentifiedImageError
    missing = [f for f in paths if not os.path.isfile(f)]
    if missing:
        raise ValueError(f"no such image file: {', '.join(missing)}")
    unreadable = []
    for f in paths:
        try:
            with Image.open(f) as img:
                img.verify()  # reads the header and checks the data without decoding it to pixels
        except (UnidentifiedImageError, OSError, SyntaxError) as e:  # what PIL raises for a non-image / truncated file
            unreadable.append(f"{f} ({e.__class__.__name__})")
    if unreadable:
        raise ValueError(f"not an image PIL can read: {', '.join(unreadable)}")


def _palette(n):
    """A fixed RGB palette for ``n`` labels (label 0 black; the rest spread over hues), as a flat list for PIL."""
    import colorsys
    colours = [(0, 0, 0)] + [tuple(int(255 * c) for c in colorsys.hsv_to_rgb((k * 0.618034) % 1, 0.75, 0.95))
                             for k in range(1, n)]
    return [v for c in colours[:256] for v in c]


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
    q = sub.add_parser("info", help="size, parameter count and weights of one model or pretrained tag")
    q.add_argument("name", help="model name (ea_vit_base) or pretrained tag (ea_vit_micro.seg_scenes)")
    q.add_argument("--task", default=None, help="task of a model name (default cls); a tag has its own")
    q.add_argument("--args", default="{}", help='task arguments as JSON, e.g. \'{"img_size": 32}\'')
    q.set_defaults(func=_info)
    q = sub.add_parser("predict", help="run a pretrained checkpoint on image files (zoo.preprocess, then the model)")
    q.add_argument("tag", help="pretrained tag, e.g. sa_vit_micro.cls_fmnist (zoo pretrained lists them)")
    q.add_argument("images", nargs="+", help="image files (any format PIL reads)")
    q.add_argument("--top", type=int, default=5, help="classes to print per image")
    q.add_argument("--out", default=None, help="segmentation: folder for the label maps (palette PNGs)")
    q.add_argument("--overwrite", action="store_true", help="segmentation: replace label maps already in --out")
    q.set_defaults(func=_predict)
    args = p.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, KeyError) as e:
        print(f"zoo: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
