"""Pretrained weights for other data, as timm's ``create_model(name, pretrained=True, num_classes=...)`` gives them.

``zoo.load(..., pretrained=..., num_classes=5)`` (or ``in_chans=``, ``img_size=``) builds the model with the
arguments the weights were trained with, loads them with every check of an exact load (sha256, architecture, strict
keys), and only then changes the model:

================  ========================================================================  ========================
argument          what changes                                                              tasks
================  ========================================================================  ========================
``num_classes``   a fresh classifier (the last layer only; every other weight is kept)      cls, seg, pcls, pseg
``in_chans``      the patch embedding's kernel: 1 -> C repeated and divided by C, C -> 1    cls (``vit`` models)
                  summed (``zoo.layers.adapt_in_chans``)
``img_size``      the position embedding, resampled bicubically to the new grid once        cls (``vit``), seg: the
                  (the seg crop: a non-``ff`` segmentor takes any size anyway)              trunk; not ``ff``
================  ========================================================================  ========================

A segmentation trunk with other input channels starts from classification weights (``backbone_checkpoint=``).
Anything else that differs from the weights is an error, as before.

Afterwards ``model.zoo_config`` rebuilds the adapted architecture (so ``zoo.save_pretrained`` publishes the
fine-tuned model) and ``model.pretrained_cfg`` describes the adapted input and head: ``num_classes``,
``input_size``, ``mean``/``std`` (repeated or averaged over channels), ``label_names`` dropped with a new
classifier, and ``adapted``: ``{argument: [trained value, new value]}``. Its ``metrics`` stay those of the weights as
published.
"""
import logging

from .hub import effective_args
from .layers.patch_embed import _pair

ADAPTABLE = ("num_classes", "in_chans", "img_size")
_TASKS = {"num_classes": ("cls", "seg", "pcls", "pseg"), "in_chans": ("cls",), "img_size": ("cls", "seg")}
_WHY = {("seg", "in_chans"): "a segmentation trunk for other input channels starts from classification weights: "
                             "zoo.load(name, task='seg', in_chans=..., backbone_checkpoint=<a cls tag>)",
        "gen": "a generator has no classifier or image input to adapt",
        "pcls": "a point model reads points, not images", "pseg": "a point model reads points, not images"}

log = logging.getLogger(__name__)


def adaptable(task):
    """The arguments ``adapt`` can change for ``task``."""
    return tuple(arg for arg in ADAPTABLE if task in _TASKS[arg])


def pop_adaptable(kwargs):
    """Remove and return the adaptable arguments of ``kwargs`` (the build uses the weights' own values)."""
    return {k: kwargs.pop(k) for k in ADAPTABLE if k in kwargs}


def _norm(arg, value):
    return list(_pair(value)) if arg == "img_size" and value is not None else value


def adapt(model, wanted, what="the weights"):
    """Change ``model`` (weights already loaded) to the ``wanted`` ``{argument: value}``; returns what changed.

    Args:
        model: A zoo model built by the registry (it carries ``zoo_config``).
        wanted: Values of ``ADAPTABLE`` arguments; those equal to the model's are left alone.
        what: How to name the weights in messages (e.g. the tag).

    Returns:
        ``{argument: [old, new]}`` for every argument that changed.
    """
    zc = model.zoo_config
    name, task = zc["name"], zc["task"]
    current = effective_args(name, task, dict(zc["args"]))
    changes = {}
    for arg in ADAPTABLE:
        if arg not in wanted:
            continue
        old, new = _norm(arg, current.get(arg)), _norm(arg, wanted[arg])
        if old == new:
            continue
        if task not in _TASKS[arg] or (task == "cls" and arg != "num_classes" and not hasattr(model, "patch_embed")):
            why = _WHY.get((task, arg), _WHY.get(task, f"{name} has no patch embedding to adapt"))
            trained = f" (trained with {arg}={old!r})" if old is not None else ""
            raise ValueError(f"{name} ({task}) cannot adapt {what}{trained} to {arg}={new!r}: {why}. Drop {arg}= "
                             f"to load them as trained.")
        least = 0 if (arg, task) == ("num_classes", "cls") else 1  # cls: 0 drops the head, as in timm
        if arg != "img_size" and (not isinstance(new, int) or isinstance(new, bool) or new < least):
            raise ValueError(f"{arg} must be an integer >= {least} for {task}, got {new!r}")
        if arg == "num_classes":
            model.reset_classifier(new)
        elif arg == "in_chans":
            model.patch_embed.set_in_chans(new)
        else:
            model.set_input_size(new)
        changes[arg] = [old, new]
    if not changes:
        return changes
    model.zoo_config = dict(zc, args={**zc["args"], **{k: v[1] for k, v in changes.items()}})
    cfg = getattr(model, "pretrained_cfg", None)
    if isinstance(cfg, dict):
        model.pretrained_cfg = _adapted_cfg(cfg, changes)
    log.info("%s adapted to %s", what, ", ".join(f"{k}={v[1]} (trained with {v[0]})" for k, v in changes.items()))
    return changes


def _channels(values, c):
    """mean or std for ``c`` channels: 1 -> C repeats the grey value, C -> 1 averages the channels."""
    return [float(values[0])] * c if len(values) == 1 else [sum(map(float, values)) / len(values)] * c


def _adapted_cfg(cfg, changes):
    """``pretrained_cfg`` (a registry entry's or a ``config.json``'s) describing the adapted head and input."""
    cfg = dict(cfg)
    new = {k: v[1] for k, v in changes.items()}
    if "num_classes" in new:
        cfg["num_classes"], cfg["label_names"] = new["num_classes"], None
    spec = dict(cfg["input"]) if isinstance(cfg.get("input"), dict) else None  # config.json's input spec
    for where in (cfg, spec):
        if where is None:
            continue
        if "in_chans" in new:
            for key in ("mean", "std"):
                if where.get(key):
                    where[key] = _channels(where[key], new["in_chans"])
        if where is spec:
            where.update({k: v for k, v in new.items() if k in ("in_chans", "img_size")})
    if spec is not None:
        cfg["input"] = spec
    size = cfg.get("input_size")
    if size and len(size) == 3:
        h, w = new.get("img_size", size[1:])
        cfg["input_size"] = [new.get("in_chans", size[0]), h, w]
    cfg["adapted"] = {**cfg.get("adapted", {}), **changes}
    return cfg
