"""Model names, tasks, pretrained tags and the resolution of ``zoo.load``.

A model name is ``{mixer}_{arch}_{size}`` (e.g. ``ea_vit_base``), registered once per mixer x size; every name
works with every task. A pretrained tag is ``{model}.{task}_{dataset}`` (e.g. ``ff_vit_micro.cls_fmnist``) and
names the Hub repo, revision and sha256 of its weights file.
"""
import difflib
import importlib

from . import mixers
from .backbones.vit import SIZES

ARCHS = ("vit",)

# name -> dict(mixer, arch, size); filled once below, never by import side effects elsewhere.
MODELS = {f"{m}_{a}_{s}": dict(mixer=m, arch=a, size=s) for m in mixers.MIXERS for a in ARCHS for s in SIZES}

# task code -> module whose ``build(model_name, mixer=, size=, **kwargs)`` returns the model. Imported lazily so
# ``import zoo`` stays light (segmentation pulls in mmseg).
TASKS = {
    "cls": "zoo.heads.cls",
    "seg": "zoo.heads.seg",
    "gen": "zoo.heads.gen",
    "pcls": "zoo.heads.points",
    "pseg": "zoo.heads.points",
}
TASK_ALIASES = {
    "classification": "cls", "image-classification": "cls",
    "segmentation": "seg", "semantic-segmentation": "seg",
    "generation": "gen", "gan": "gen", "image-generation": "gen",
    "point-classification": "pcls", "pointcloud-classification": "pcls",
    "part-segmentation": "pseg", "point-segmentation": "pseg",
}
TASK_NAMES = {"cls": "image classification", "seg": "semantic segmentation", "gen": "image generation (GAN)",
              "pcls": "point-cloud classification", "pseg": "point-cloud part segmentation"}

# tag -> where its weights live: ``hf_hub_id`` (repo id, ``zoo-models/{tag}``), ``revision`` (the commit hash the
# publish made, so the files cannot move under a tag), ``sha256`` of ``model.safetensors`` (verified after
# download) and ``args`` (the architecture arguments the weights need, the defaults of ``zoo.load``). An entry is
# added only for a checkpoint actually published, from what ``tools/publish.py`` prints; ``results/<tag>.json``
# holds its measured metrics (docs/hub.md).
PRETRAINED = {}


def _close(name, options):
    close = difflib.get_close_matches(name, list(options), n=5, cutoff=0.5)
    return f" Close matches: {', '.join(close)}." if close else ""


def resolve_task(task):
    """Return the task code for ``task`` (a code or a long alias)."""
    code = TASK_ALIASES.get(task, task)
    if code not in TASKS:
        valid = ", ".join(f"{k} ({v})" for k, v in TASK_NAMES.items())
        raise ValueError(f"unknown task {task!r}; valid tasks: {valid}.{_close(str(task), list(TASKS) + list(TASK_ALIASES))}")
    return code


def model_info(name):
    """Return ``dict(mixer, arch, size)`` for a registered model; an unknown name lists close matches."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; {len(MODELS)} models are registered (zoo.list_models())."
                         f"{_close(name, MODELS)}") from None


def list_models(pattern=None, task=None, pretrained=False):
    """Registered model names, optionally filtered by a glob ``pattern``, a ``task`` and having weights.

    Every backbone works with every task, so ``task`` filters only together with ``pretrained=True``.
    """
    import fnmatch
    names = sorted(MODELS)
    if task is not None:
        task = resolve_task(task)
    if pattern:
        names = [n for n in names if fnmatch.fnmatch(n, pattern)]
    if pretrained:
        tags = list_pretrained(task=task)
        names = [n for n in names if any(t.split(".")[0] == n for t in tags)]
    return names


def list_pretrained(pattern=None, task=None):
    """Pretrained tags (``model.task_dataset``), optionally filtered."""
    import fnmatch
    tags = sorted(PRETRAINED)
    if task is not None:
        task = resolve_task(task)
        tags = [t for t in tags if t.split(".", 1)[1].split("_", 1)[0] == task]
    if pattern:
        tags = [t for t in tags if fnmatch.fnmatch(t, pattern)]
    return tags


def find_pretrained(name, task):
    """The pretrained tag of ``name`` for ``task``; an error names what exists when there is none."""
    if "." in name:
        base, tag = name, name
        if tag not in PRETRAINED:
            raise ValueError(f"no pretrained weights {tag!r}.{_close(tag, PRETRAINED)} Available for "
                             f"{base.split('.')[0]}: {', '.join(list_pretrained(base.split('.')[0] + '.*')) or 'none'}")
        return tag
    tags = list_pretrained(f"{name}.*", task=task)
    if not tags:
        have = list_pretrained(f"{name}.*")
        raise ValueError(f"{name} has no pretrained weights for task {task!r}; "
                         f"{'it has: ' + ', '.join(have) if have else 'it has none for any task'}. "
                         f"Models with {task} weights: {', '.join(list_models(task=task, pretrained=True)) or 'none'}. "
                         f"Use pretrained=False for a randomly initialised model.")
    return tags[0]


def build(name, task="cls", **kwargs):
    """Build model ``name`` for ``task`` with random weights (``zoo.load`` adds weights)."""
    task = resolve_task(task)
    info = model_info(name)
    module = importlib.import_module(TASKS[task])
    model = module.build(name, task=task, mixer=info["mixer"], size=info["size"], **kwargs)
    # Everything needed to rebuild this model, as plain JSON (written to config.json by ``zoo.hub``).
    model.zoo_config = dict(name=name, task=task, args=dict(kwargs))
    return model


def load(name, task="cls", pretrained=False, checkpoint=None, checkpoint_options=None, **kwargs):
    """Build a model for a task, optionally with weights.

    Args:
        name: A registered name (``ea_vit_base``), a pretrained tag (``ff_vit_micro.cls_fmnist``), or a published
            folder: ``hf-hub:org/name[@revision]`` or ``local-dir:/path``.
        task: ``cls``, ``seg``, ``gen``, ``pcls`` or ``pseg`` (long aliases accepted).
        pretrained: Download the registry's weights for this task (never falls back to random weights).
        checkpoint: A local weights file (zoo safetensors, or a foreign layout that ``zoo.convert`` recognises).
        checkpoint_options: Options of ``zoo.convert.load_checkpoint``, e.g. ``dict(drop_head=True)`` to keep a
            fresh head for another ``num_classes``, ``dict(drop_distillation=True)`` for distilled DeiT weights.
        **kwargs: Task arguments, e.g. ``num_classes``, ``img_size``, ``in_chans``, ``patch_size``.

    Returns:
        The ``nn.Module`` for the task (in train mode, as torch modules start).
    """
    if name.startswith(("hf-hub:", "local-dir:")):
        from . import hub
        return hub.load_published(name, **kwargs)
    if "." in name:  # a pretrained tag names its task: ff_vit_micro.cls_fmnist -> cls
        tag = find_pretrained(name, task)
        name, pretrained, task = tag.split(".")[0], tag, tag.split(".", 1)[1].split("_", 1)[0]
    elif pretrained is True:  # resolve the tag before building, so a missing one fails fast
        pretrained = find_pretrained(name, resolve_task(task))
    if pretrained:
        from . import hub
        # Download options (cache_dir, force_download, ...) go to the hub; the tag's architecture arguments
        # (e.g. num_classes=10, img_size=28, in_chans=1 for Fashion-MNIST) are the defaults of the build.
        hub_kwargs = {k: kwargs.pop(k) for k in hub.DOWNLOAD_OPTIONS if k in kwargs}
        kwargs = {**PRETRAINED[pretrained].get("args", {}), **kwargs}
    model = build(name, task=task, **kwargs)
    if pretrained:
        hub.load_pretrained_tag(model, pretrained, PRETRAINED[pretrained], **hub_kwargs)
    if checkpoint is not None:
        from . import convert
        convert.load_checkpoint(model, checkpoint, **(checkpoint_options or {}))
    return model
