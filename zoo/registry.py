"""Model names, tasks and pretrained tags, and building a model with random weights (``zoo.load``, in
``zoo.factory``, adds weights).

A model name is ``{mixer}_{arch}_{size}`` (e.g. ``ea_vit_base``), registered once per mixer x size; every name
works with every task. A pretrained tag is ``{model}.{task}_{dataset}`` (e.g. ``ff_vit_micro.cls_fmnist``) and
names the Hub repo, revision and sha256 of its weights file.
"""
import dataclasses
import difflib
import importlib

from . import mixers
from . import pretrained as _pretrained
from .backbones import t2t, vit


@dataclasses.dataclass(frozen=True)
class TaskInfo:
    """One task of the zoo: every fact about it that the registry, the CLI, the cards and the tools need.

    Args:
        module: Module whose ``build(model_name, task=, mixer=, size=, **kwargs)`` returns the model; imported
            lazily, so ``import zoo`` stays light (segmentation pulls in mmseg).
        name: The task in words (error messages, the CLI).
        aliases: Long names accepted for the code (``zoo.load(..., task="segmentation")``).
        pipeline_tag: The Hub's pipeline tag of a card (the Hub has no point-cloud pipeline: ``other``).
        index_type, index_name: Task type and name of the card's model-index (the Hub's schema).
        metrics: Metric names a summary shows for the task (tables, curves): the first one a checkpoint has.
    """
    module: str
    name: str
    aliases: tuple
    pipeline_tag: str
    index_type: str
    index_name: str
    metrics: tuple


# task code -> TaskInfo: the one table of tasks (its order is the order tables list them in).
TASKS = {
    "cls": TaskInfo("zoo.heads.cls", "image classification", ("classification", "image-classification"),
                    "image-classification", "image-classification", "Image Classification",
                    ("top1", "accuracy/top1")),
    "seg": TaskInfo("zoo.heads.seg", "semantic segmentation", ("segmentation", "semantic-segmentation"),
                    "image-segmentation", "image-segmentation", "Semantic Segmentation", ("mIoU",)),
    "gen": TaskInfo("zoo.heads.gen", "image generation (GAN)", ("generation", "gan", "image-generation"),
                    "unconditional-image-generation", "unconditional-image-generation", "Image Generation",
                    ("FID(inception-v3)", "FID(fmnist-clf)", "FID")),
    "pcls": TaskInfo("zoo.heads.points", "point-cloud classification",
                     ("point-classification", "pointcloud-classification"),
                     "other", "point-cloud-classification", "Point Cloud Classification", ("OA",)),
    "pseg": TaskInfo("zoo.heads.points", "point-cloud part segmentation", ("part-segmentation", "point-segmentation"),
                     "other", "point-cloud-segmentation", "Point Cloud Part Segmentation", ("instance_mIoU",)),
}
TASK_ALIASES = {alias: code for code, t in TASKS.items() for alias in t.aliases}  # derived: long name -> code

# Backbone families: arch -> (sizes, tasks it can serve). ``vit`` (conv patch embedding, zoo.backbones.vit) serves
# every task; ``t2t`` (the tokens-to-token front end of T2T-ViT / EAMLP, zoo.backbones.t2t) classifies only: its
# soft-split tokenizer has no dense or point counterpart here.
ARCHS = {"vit": (vit.SIZES, tuple(TASKS)), "t2t": (t2t.SIZES, ("cls",))}

# name -> dict(mixer, arch, size); filled once here, never by import side effects elsewhere.
MODELS = {f"{m}_{a}_{s}": dict(mixer=m, arch=a, size=s)
          for a, (sizes, _) in ARCHS.items() for m in mixers.MIXERS for s in sizes}

# tag -> ``zoo.pretrained.PretrainedCfg``: the checkpoints trained here (the generated index ``zoo/pretrained.json``,
# from the folders under ``pretrained/``), then upstream ones converted on download.
PRETRAINED = {**_pretrained.read_index(), **_pretrained.upstream_entries()}


def register_mixer(cls, code=None):
    """Register a user mixer class (``zoo.mixers``' contract) and its model names ``{code}_{arch}_{size}``.

    Returns the model names added, e.g. ``["pool_t2t_7", "pool_vit_base", ...]``; every task can then build them.
    """
    mixers.register(cls, code)
    code = code or cls.code
    added = {f"{code}_{a}_{s}": dict(mixer=code, arch=a, size=s) for a, (sizes, _) in ARCHS.items() for s in sizes}
    MODELS.update(added)
    return sorted(added)


def _close(name, options):
    close = difflib.get_close_matches(name, list(options), n=5, cutoff=0.5)
    return f" Close matches: {', '.join(close)}." if close else ""


def resolve_task(task):
    """Return the task code for ``task`` (a code or a long alias)."""
    code = TASK_ALIASES.get(task, task)
    if code not in TASKS:
        valid = ", ".join(f"{k} ({t.name})" for k, t in TASKS.items())
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

    ``task`` keeps the names whose backbone family serves it (``vit``: every task; ``t2t``: ``cls``), and with
    ``pretrained=True`` those that have weights for it.
    """
    import fnmatch
    names = sorted(MODELS)
    if task is not None:
        task = resolve_task(task)
        names = [n for n in names if task in ARCHS[MODELS[n]["arch"]][1]]
    if pattern:
        names = [n for n in names if fnmatch.fnmatch(n, pattern.lower())]
    if pretrained:
        tags = list_pretrained(task=task)
        names = [n for n in names if any(_pretrained.parse_tag(t).model == n for t in tags)]
    return names


def list_pretrained(pattern=None, task=None):
    """Pretrained tags (``model.task_dataset``), optionally filtered by a glob ``pattern`` and a ``task``."""
    import fnmatch
    tags = sorted(PRETRAINED)
    if task is not None:
        task = resolve_task(task)
        tags = [t for t in tags if _pretrained.parse_tag(t).task == task]
    if pattern:
        tags = [t for t in tags if fnmatch.fnmatch(t, pattern.lower())]
    return tags


def pretrained_cfg(tag):
    """The ``PretrainedCfg`` of ``tag``; an unknown tag names the close ones and what its model has."""
    parsed = _pretrained.parse_tag(tag)
    entry = PRETRAINED.get(str(parsed))
    if entry is None:
        have = list_pretrained(f"{parsed.model}.*")
        raise ValueError(f"no pretrained weights {str(parsed)!r}.{_close(str(parsed), PRETRAINED)} "
                         f"{parsed.model} has: {', '.join(have) or 'none'} (zoo.list_pretrained()).")
    return entry


def find_pretrained(name, task):
    """The pretrained tag of model ``name`` for ``task``; an error names what exists when there is none."""
    tags = list_pretrained(f"{name}.*", task=task)
    if not tags:
        have = list_pretrained(f"{name}.*")
        raise ValueError(f"{name} has no pretrained weights for task {task!r}; "
                         f"{'it has: ' + ', '.join(have) if have else 'it has none for any task'}. "
                         f"Models with {task} weights: {', '.join(list_models(task=task, pretrained=True)) or 'none'}. "
                         f"Use pretrained=False for a randomly initialised model.")
    if len(tags) > 1:  # several datasets for one task: the user picks the tag
        raise ValueError(f"{name} has several {task} checkpoints ({', '.join(tags)}); load one by its tag, "
                         f"e.g. zoo.load({tags[0]!r})")
    return tags[0]


def canonical_name(name):
    """``name`` as registered: exact, else matched case-insensitively (unknown names list close matches)."""
    if name in MODELS:
        return name
    low = name.lower()
    if low in MODELS:
        return low
    model_info(name)  # raises with close matches
    return name


def build(name, task="cls", **kwargs):
    """Build model ``name`` for ``task`` with random weights (``zoo.load`` adds weights)."""
    task = resolve_task(task)
    info = model_info(name)
    served = ARCHS[info["arch"]][1]
    if task not in served:
        raise ValueError(f"{name} ({info['arch']} family) serves {', '.join(served)} only, not {task}; the vit "
                         f"family serves every task (e.g. {info['mixer']}_vit_tiny)")
    module = importlib.import_module(TASKS[task].module)
    family = {"arch": info["arch"]} if info["arch"] != "vit" else {}  # the vit builders take no arch
    model = module.build(name, task=task, mixer=info["mixer"], size=info["size"], **family, **kwargs)
    # Everything needed to rebuild this model, as plain JSON (written to config.json by ``zoo.hub``).
    model.zoo_config = dict(name=name, task=task, args=dict(kwargs))
    return model
