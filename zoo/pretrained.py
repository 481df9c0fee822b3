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
a test fails when that index is stale. Of the zoo this module imports only ``zoo.datasets`` (which imports nothing
of the zoo), so the registry and the hub can both use it.
"""
import dataclasses
import json
import os
import re
from dataclasses import dataclass, field

from . import mixers
from .datasets import DATASETS

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
        dataset: Dataset key (``zoo.datasets.DATASETS``) and its display name.
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
        ds = config.get("dataset") or {}
        weights = config.get("weights") or {}
        tag = config.get("pretrained_tag")
        if not tag:
            raise ValueError(f"config.json of {config.get('name')} has no pretrained_tag")
        kw = dict(
            tag=tag, hf_hub_id=config.get("hf_hub_id") or f"{HUB_ORG}/{tag}", revision=revision,
            sha256=weights.get("sha256"), file=weights.get("file", "model.safetensors"), args=config["args"],
            dataset=ds.get("key"), dataset_name=ds.get("name"), **published_input(config),
            num_classes=config.get("num_classes"),
            label_names=tuple(config["label_names"]) if config.get("label_names") else None,
            metrics=dict(config.get("metrics") or {}), num_params=weights.get("num_params"),
            license=config.get("license") or "apache-2.0",
            source=config.get("source") or (f"trained here: {config['training_config']}"
                                            if config.get("training_config") else ""),
            train_config=config.get("training_config"),
            extra={"training": config["training"]} if config.get("training") else {},
        )
        kw.update(overrides)
        return cls(**kw)


def published_input(config):
    """The input a published folder's ``config.json`` describes, in ``PretrainedCfg``'s fields: ``input_size``
    ``(C, H, W)``, ``num_points``, ``mean``, ``std`` (``None`` where it says nothing)."""
    inp = config.get("input") or {}
    size, chans = inp.get("img_size"), inp.get("in_chans", inp.get("out_chans"))
    return dict(input_size=tuple([chans, *size]) if size and chans else None, num_points=inp.get("num_points"),
                mean=tuple(inp["mean"]) if inp.get("mean") else None, std=tuple(inp["std"]) if inp.get("std") else None)


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


# -- upstream checkpoints -------------------------------------------------------------------------------------------
# Weights trained elsewhere and published by their authors, converted on download (zoo.upstream) into the zoo's
# layout. Their metrics are the authors' (never measured here: the data sets and files cannot be fetched on the
# machines this zoo was built on). Where the file name carries torch.hub's sha256 prefix it is the entry's sha256
# and is checked after download; the Hub revisions are unpinned (None: the repo's main) until someone with network
# access pins them.
_REPORTED = "reported upstream, not measured here"

# BibTeX of the upstream weights' papers (facts from the papers and repositories; the mixers' own papers are in
# ``zoo.mixers``). A card cites the entry's papers, then the mixer's, then DeiT (whose layout the trunk follows).
DEIT_CITATION = """@inproceedings{touvron2021deit,
  title     = {Training data-efficient image transformers \\& distillation through attention},
  author    = {Touvron, Hugo and Cord, Matthieu and Douze, Matthijs and Massa, Francisco and
               Sablayrolles, Alexandre and J{\\'e}gou, Herv{\\'e}},
  booktitle = {International Conference on Machine Learning},
  year      = {2021}
}"""
UPERNET_CITATION = """@inproceedings{xiao2018upernet,
  title     = {Unified Perceptual Parsing for Scene Understanding},
  author    = {Xiao, Tete and Liu, Yingcheng and Zhou, Bolei and Jiang, Yuning and Sun, Jian},
  booktitle = {European Conference on Computer Vision},
  year      = {2018}
}"""
MMSEG_CITATION = """@misc{mmseg2020,
  title        = {{MMSegmentation}: OpenMMLab Semantic Segmentation Toolbox and Benchmark},
  author       = {MMSegmentation Contributors},
  howpublished = {\\url{https://github.com/open-mmlab/mmsegmentation}},
  year         = {2020}
}"""
T2T_CITATION = """@inproceedings{yuan2021t2tvit,
  title     = {Tokens-to-Token ViT: Training Vision Transformers from Scratch on ImageNet},
  author    = {Yuan, Li and Chen, Yunpeng and Wang, Tao and Yu, Weihao and Shi, Yujun and Jiang, Zi-Hang and
               Tay, Francis E. H. and Feng, Jiashi and Yan, Shuicheng},
  booktitle = {IEEE/CVF International Conference on Computer Vision},
  year      = {2021}
}"""


def _dataset_fields(key, num_classes):
    """The dataset fields of an upstream entry, from its record in ``zoo.datasets.DATASETS``."""
    d = DATASETS[key]
    return dict(dataset=key, dataset_name=d["name"], num_classes=num_classes, mean=d["mean"], std=d["std"])


_IN1K = _dataset_fields("in1k", 1000)
# mmseg normalises 0..255 pixels by mean (123.675, 116.28, 103.53), std (58.395, 57.12, 57.375): the same in 0..1.
_ADE = _dataset_fields("ade20k", 150)
_MMSEG = "https://download.openmmlab.com/mmsegmentation/v0.5/vit/"
_FF = "https://github.com/lukemelas/do-you-even-need-attention/releases/download/v0.0.1/"
_EANET = ("https://github.com/MenghaoGuo/EANet/raw/c4bb93b82e11d75d3738517d1d2089f4726ff9e4/EAMLP/EAMLP_7_384/"
          "model_best.pth.tar")


def upstream_entries():
    """``{tag: PretrainedCfg}`` of the upstream checkpoints (DeiT, mmseg UPerNet-DeiT, FF-only, EAMLP-7)."""
    entries = []
    for size, top1, params, sha in (("tiny", 72.2, 5717416, "a1311bcf"), ("small", 79.8, 22050664, "cd65a155"),
                                    ("base", 81.8, 86567656, "b5f2ef4d")):
        entries.append(PretrainedCfg(
            tag=f"sa_vit_{size}.cls_in1k", hf_hub_id=f"timm/deit_{size}_patch16_224.fb_in1k",
            file="model.safetensors", converter="timm_vit", args=dict(num_classes=1000, img_size=224, patch_size=16),
            input_size=(3, 224, 224), **_IN1K, metrics={"top1": top1},
            metrics_source=f"{_REPORTED} (DeiT paper, Table 1)", num_params=params, license="apache-2.0",
            source=f"DeiT (Touvron et al. 2021), timm's Hub repo; original file "
                   f"https://dl.fbaipublicfiles.com/deit/deit_{size}_patch16_224-{sha}.pth",
            citation=DEIT_CITATION, extra=dict(crop_pct=0.875, interpolation="bicubic")))
    for size, path, sha, miou, ms, params, cfg in (
            ("small", "upernet_deit-s16_mln_512x512_160k_ade20k/"
                      "upernet_deit-s16_mln_512x512_160k_ade20k_20210621_161021-fb9a5dfb.pth",
             "fb9a5dfb", 43.82, 45.07, 57995180, "vit_deit-s16_mln_upernet_8xb2-160k_ade20k-512x512.py"),
            ("base", "upernet_deit-b16_mln_512x512_160k_ade20k/"
                     "upernet_deit-b16_mln_512x512_160k_ade20k_20210621_191949-4e1450f3.pth",
             "4e1450f3", 45.46, 47.16, 144173612, "vit_deit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py")):
        entries.append(PretrainedCfg(
            tag=f"sa_vit_{size}.seg_ade20k", hf_hub_id=f"{HUB_ORG}/sa_vit_{size}.seg_ade20k", sha256=sha,
            file=path.rsplit("/", 1)[1], url=_MMSEG + path, converter="mmseg_vit",
            args=dict(num_classes=150, img_size=512, patch_size=16, channels=512, aux_channels=256, final_norm=False,
                      class_token=True, padded_logits="stretch"),
            input_size=(3, 512, 512), **_ADE, metrics={"mIoU": miou, "mIoU_ms_flip": ms}, num_params=params,
            metrics_source=f"{_REPORTED} (mmsegmentation configs/vit/metafile.yaml, {cfg})", license="apache-2.0",
            source=f"mmsegmentation UPerNet + DeiT-{size[0].upper()}16 + MLN, 8x2 160k iterations on ADE20K, {cfg}",
            citation="\n\n".join((UPERNET_CITATION, MMSEG_CITATION, DEIT_CITATION)),
            extra=dict(mmseg_config=cfg, test_mode="whole")))
    for size, top1, params in (("tiny", 61.4, 7676332), ("base", 74.9, 61943020)):
        entries.append(PretrainedCfg(
            tag=f"ff_vit_{size}.cls_in1k", hf_hub_id=f"{HUB_ORG}/ff_vit_{size}.cls_in1k",
            file=f"linear-{size}-checkpoint.pth", url=_FF + f"linear-{size}-checkpoint.pth", converter="ff_official",
            args=dict(num_classes=1000, img_size=224, patch_size=16), input_size=(3, 224, 224), **_IN1K,
            metrics={"top1": top1}, metrics_source=f"{_REPORTED} (the FF-only repository's README)",
            num_params=params, license="other",  # the repository has no LICENSE file
            source="Melas-Kyriazi 2021, 'Do You Even Need Attention?', GitHub release v0.0.1 (DeiT main.py "
                   "container, weights under 'model')", citation=mixers.info("ff")["citation"],
            extra=dict(state_dict_key="model", crop_pct=0.875, interpolation="bicubic")))
    entries.append(PretrainedCfg(
        tag="ea_t2t_7.cls_in1k", hf_hub_id=f"{HUB_ORG}/ea_t2t_7.cls_in1k", file="model_best.pth.tar", url=_EANET,
        converter="eamlp_t2t", args=dict(num_classes=1000, img_size=384), input_size=(3, 384, 384), **_IN1K,
        metrics={"top1": 71.7}, num_params=6096206,
        metrics_source=f"{_REPORTED} (EANet EAMLP/EAMLP_7_384/summary.csv, EMA weights)",
        license="other",  # no LICENSE in the EANet repository; its EAMLP code carries T2T-ViT's Clear BSD header
        source="Guo et al. 2021, EANet EAMLP-7 (T2T-ViT-7 front end, performer tokens, External Attention blocks), "
               "300 epochs at 384", citation="\n\n".join((mixers.info("ea")["citation"], T2T_CITATION)),
        extra=dict(state_dict_key="state_dict_ema", crop_pct=0.9, interpolation="bicubic")))
    return {e.tag: e for e in entries}
