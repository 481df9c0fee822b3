"""Start a training from zoo weights: ``tools/train.py CONFIG --pretrained WEIGHTS``, or in the config itself
``load_from = "zoo:WEIGHTS"`` (mmsegmentation's key for the checkpoint a run starts from).

``WEIGHTS`` is what ``zoo.load`` accepts: a tag (``ea_vit_micro.seg_scenes``), ``hf-hub:org/name`` or
``local-dir:/path``. The weights are adapted to the config's model where ``zoo.adapt`` can (a fresh classifier for
its ``num_classes``, its channels, its crop) and must fit it exactly otherwise; they are loaded strictly, unlike a
``.pth`` in ``load_from``, which mmengine loads ignoring keys that do not match.
"""
import sys

PREFIX = "zoo:"


def weights_to_start_from(cfg, pretrained=None):
    """The zoo weights a run of ``cfg`` starts from: ``pretrained`` (the command line's ``--pretrained``), else the
    config's ``load_from = "zoo:WEIGHTS"``. A ``zoo:`` ``load_from`` is taken out of ``cfg`` (the Runner reads
    files only); a ``.pth`` one stays for the Runner."""
    load_from = cfg.get("load_from")
    from_cfg = None
    if isinstance(load_from, str) and load_from.startswith(PREFIX):
        from_cfg = load_from[len(PREFIX):].strip()
        if not from_cfg:
            raise ValueError(f"load_from={load_from!r} names no weights: write a tag, hf-hub:org/name or "
                             f"local-dir:/path after {PREFIX!r}, e.g. load_from='zoo:ea_vit_micro.seg_scenes'")
        cfg.load_from = None
    if pretrained and from_cfg and pretrained != from_cfg:
        print(f"--pretrained {pretrained} replaces the config's load_from={load_from!r}", file=sys.stderr)
    return pretrained or from_cfg


def start_from(runner, weights):
    """Put zoo ``weights`` into the runner's zoo model, adapted to the config's model (module docstring). Call it
    after the Runner is built and before ``runner.train()``: loaded modules count as initialised, so the Runner's
    ``init_weights`` keeps them, and a resumed checkpoint still replaces them."""
    import zoo
    from tasks.common.evaluate import load_zoo_weights, zoo_model_of
    from zoo import adapt, hub
    target = zoo_model_of(runner, weights)
    zc = target.zoo_config
    args = hub.effective_args(zc["name"], zc["task"], dict(zc["args"]))
    wanted = {k: args[k] for k in adapt.adaptable(zc["task"]) if args.get(k) is not None}
    load_zoo_weights(runner, zoo.load(weights, **wanted), source=f"pretrained weights {weights}")
