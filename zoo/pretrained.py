"""Pretrained weights: the tag grammar, the typed entry (``PretrainedCfg``) and the index of known checkpoints.

A tag names a model and the weights it carries, ``{model}.{task}_{dataset}``, e.g. ``ea_vit_micro.seg_scenes``
(timm's ``name.tag`` convention). ``parse_tag`` is the one parser of that grammar.

Each known checkpoint is one ``PretrainedCfg``: where the weights live (the folder ``pretrained/<tag>/`` of a
source checkout, a Hub repo pinned to a commit, or an upstream URL), the sha256 they must have, the architecture
arguments they need, and what a user needs to use them (input size, mean/std or point count, label names), with
the metrics of their card and where those come from. ``model.pretrained_cfg`` of a loaded model is
``PretrainedCfg.to_dict()``.

The entries of the checkpoints trained here are generated, never typed: ``tools/make_cards.py`` reads the
published folders under ``pretrained/`` (written by ``tools/make_weights.py``) and writes ``zoo/pretrained.json``;
a test fails when that index is stale. This module imports nothing else of the zoo, so the registry and the hub
can both use it.
"""
import dataclasses
import json
import os
import re
from dataclasses import dataclass, field

INDEX_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained.json")
# The folder of bundled checkpoints in a source checkout (absent from a wheel: those load from the Hub).
BUNDLED_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pretrained")
HUB_ORG = "zoo-models"

_TAG_RE = re.compile(r"^(?P<model>[a-z0-9]+(?:_[a-z0-9]+)+)\.(?P<task>[a-z]+)_(?P<dataset>[a-z0-9][a-z0-9_-]*)$")


@dataclass(frozen=True)
class Tag:
    """A parsed tag: ``Tag("ea_vit_micro", "seg", "scenes")`` is ``ea_vit_micro.seg_scenes``."""
    model: str
    task: str
    dataset: str

    def __str__(self):
        return f"{self.model}.{self.task}_{self.dataset}"


def looks_like_tag(text):
    """True when ``text`` is meant as a tag (it has a ``.``), not a model name or a ``hf-hub:``/``local-dir:`` ref."""
    return isinstance(text, str) and "." in text and not text.startswith(("hf-hub:", "local-dir:"))


def parse_tag(text):
    """Split ``{model}.{task}_{dataset}`` into a ``Tag`` (case-insensitive); a malformed tag is a ``ValueError``.

    The task part is taken as written; ``zoo.registry.resolve_task`` checks it against the known tasks.
    """
    m = _TAG_RE.match(str(text).strip().lower())
    if m is None:
        raise ValueError(f"{text!r} is not a pretrained tag; expected {{model}}.{{task}}_{{dataset}}, e.g. "
                         f"ea_vit_micro.seg_scenes (zoo.list_pretrained() lists them)")
    return Tag(m["model"], m["task"], m["dataset"])


@dataclass(frozen=True)
class PretrainedCfg:
    """One checkpoint that ``zoo.load(..., pretrained=True)`` can load (timm's ``PretrainedCfg`` for this zoo).

    Args:
        tag: ``{model}.{task}_{dataset}``.
        hf_hub_id: Hub model repo of the weights (``zoo-models/<tag>`` for the zoo's own).
        revision: Commit of the repo that pins the files; ``None`` while the checkpoint is not on the Hub yet.
        sha256: sha256 of the weights file, checked on every path (checkout folder, Hub cache, download).
        file: The weights file in the repo or folder.
        url: An upstream URL the weights are converted from (upstream checkpoints only).
        converter: The ``zoo.convert`` layout of an upstream file (``timm``, ``mmseg``, ...), ``None`` for zoo ones.
        args: Architecture arguments the weights need (the defaults of ``zoo.load`` for this tag).
        dataset: Dataset key (``zoo.cards.DATASETS``) and its display name.
        input_size: ``(channels, height, width)`` for images; ``num_points`` for point clouds.
        mean, std: Input normalisation, 0..1 pixel units.
        num_classes, label_names: The head's classes (or parts) and their names.
        metrics: The card's numbers, e.g. ``{"top1": 90.1}``; ``metrics_source`` says whether they were measured
            here or are reported upstream.
        num_params: Parameters of the model.
        license: Licence of the weights (a Hub licence id).
        source: How the weights were made: the command and config here, or the upstream release.
        train_config: The mmengine config (recipe) the weights were trained and evaluated with, if it is in the repo.
        citation: BibTeX of the weights' paper, for upstream weights.
        extra: Anything else the card records (e.g. ``eval_throughput``).
    """
    tag: str
    hf_hub_id: str
    revision: str | None = None
    sha256: str | None = None
    file: str = "model.safetensors"
    url: str | None = None
    converter: str | None = None
    args: dict = field(default_factory=dict)
    dataset: str | None = None
    dataset_name: str | None = None
    input_size: tuple | None = None
    num_points: int | None = None
    mean: tuple | None = None
    std: tuple | None = None
    num_classes: int | None = None
    label_names: tuple | None = None
    metrics: dict = field(default_factory=dict)
    metrics_source: str = "measured here"
    num_params: int | None = None
    license: str = "apache-2.0"
    source: str = ""
    train_config: str | None = None
    citation: str | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        parsed = parse_tag(self.tag)
        if str(parsed) != self.tag:
            raise ValueError(f"tag {self.tag!r} is not in canonical form {str(parsed)!r}")
        if self.sha256 is not None and not re.fullmatch(r"[0-9a-f]{8,64}", self.sha256):
            raise ValueError(f"{self.tag}: sha256 {self.sha256!r} is not hex (a prefix of at least 8 digits)")

    @property
    def model(self):
        return parse_tag(self.tag).model

    @property
    def task(self):
        return parse_tag(self.tag).task

    @property
    def bundled_dir(self):
        """The checkout folder holding this checkpoint (it may not exist, e.g. in a wheel install)."""
        return os.path.join(BUNDLED_DIR, self.tag)

    def to_dict(self):
        """Plain JSON-able dict (``model.pretrained_cfg``); tuples become lists."""
        d = dataclasses.asdict(self)
        return json.loads(json.dumps(d))

    @classmethod
    def from_dict(cls, d):
        """Inverse of ``to_dict``; unknown keys are an error naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"pretrained entry {d.get('tag')!r}: unknown fields {unknown}")
        d = dict(d)
        for key in ("input_size", "mean", "std", "label_names"):
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        return cls(**d)

    @classmethod
    def from_published(cls, config, revision=None, **overrides):
        """The entry of a published folder's ``config.json`` (written by ``zoo.hub.save_pretrained``)."""
        inp = config.get("input") or {}
        ds = config.get("dataset") or {}
        weights = config.get("weights") or {}
        tag = config.get("pretrained_tag")
        if not tag:
            raise ValueError(f"config.json of {config.get('name')} has no pretrained_tag")
        size = inp.get("img_size")
        chans = inp.get("in_chans", inp.get("out_chans"))
        kw = dict(
            tag=tag, hf_hub_id=config.get("hf_hub_id") or f"{HUB_ORG}/{tag}", revision=revision,
            sha256=weights.get("sha256"), file=weights.get("file", "model.safetensors"), args=config["args"],
            dataset=ds.get("key"), dataset_name=ds.get("name"),
            input_size=tuple([chans, *size]) if size and chans else None, num_points=inp.get("num_points"),
            mean=tuple(inp["mean"]) if inp.get("mean") else None, std=tuple(inp["std"]) if inp.get("std") else None,
            num_classes=config.get("num_classes"),
            label_names=tuple(config["label_names"]) if config.get("label_names") else None,
            metrics=dict(config.get("metrics") or {}), num_params=weights.get("num_params"),
            license=config.get("license") or "apache-2.0",
            source=config.get("source") or (f"trained here: {config['training_config']}"
                                            if config.get("training_config") else ""),
            train_config=config.get("training_config"),
            extra={k: config[k] for k in ("training", "eval_throughput") if config.get(k)},
        )
        kw.update(overrides)
        return cls(**kw)


def read_index(path=INDEX_PATH):
    """``{tag: PretrainedCfg}`` of the generated index (empty when the file does not exist)."""
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    return {d["tag"]: PretrainedCfg.from_dict(d) for d in data["entries"]}


def index_text(entries):
    """The text of ``zoo/pretrained.json`` for ``entries`` (sorted, stable: regenerating it changes nothing)."""
    data = {"generated_by": "tools/make_cards.py from pretrained/*/config.json; do not edit by hand",
            "entries": [entries[t].to_dict() for t in sorted(entries)]}
    return json.dumps(data, indent=1, sort_keys=True) + "\n"
