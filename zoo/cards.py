"""Model cards, generated from data: a published ``config.json`` becomes the ``README.md`` of its Hub repo.

A card has YAML front matter the Hub reads (``library_name``, ``license``, ``tags``, ``datasets``,
``pipeline_tag`` and a ``model-index`` with the measured metrics, the format of the Hub's model card spec), then
what the model is, its token mixer's paper, the training data and recipe, the evaluation results, usage code and
the citation. ``MODEL_CARDS.md`` (``tools/make_cards.py``) is rendered from the same records.

The front matter is ``huggingface_hub``'s ``ModelCardData`` with one ``EvalResult`` per metric (the Hub's
model-index schema), so the Hub parses it exactly as it writes it.
"""
import json
import re
import statistics

from .backbones.vit import SIZES
from . import mixers, registry
from .datasets import DATASETS
from .pretrained import DEIT_CITATION

# What a card (and the ``dataset`` entry of a published config.json) says about a dataset: these fields of the
# dataset's record in ``zoo.datasets.DATASETS``, plus its class names as ``label_names``.
CARD_FIELDS = ("name", "id", "license", "split", "url", "description")

# Metric name pattern (lower case) -> model-index metric type.
METRIC_TYPES = [
    (r"top-?1|^acc(uracy)?$|^oa$", "accuracy"),
    (r"top-?5", "top_5_accuracy"),
    (r"miou", "mean_iou"),
    (r"macc|mean_acc", "mean_accuracy"),
    (r"aacc", "pixel_accuracy"),
    (r"^fid_floor", "fid_floor"),  # FID between two halves of the real set: the data's floor, not the model's score
    (r"^fid", "fid"),
    (r"^kid_std", "kid_std"),
    (r"^kid", "kid"),
    (r"^is_std", "inception_score_std"),
    (r"^is\b|inception_score", "inception_score"),
]


def dataset_info(dataset):
    """A card's dataset record: a key of ``zoo.datasets.DATASETS`` (an unknown key: ``dict(name=key)``) or a dict."""
    if isinstance(dataset, dict):
        if not dataset.get("name"):
            raise ValueError(f"a dataset dict needs a 'name': {dataset}")
        return dict(dataset)
    record = DATASETS.get(dataset, {"name": dataset, "id": None, "split": "test"})
    info = {k: record[k] for k in CARD_FIELDS if k in record}
    if record.get("classes"):
        info["label_names"] = list(record["classes"])
    info["key"] = dataset
    return info


def metric_type(name):
    """The model-index metric type of a metric name (``accuracy/top1`` -> ``accuracy``)."""
    low = name.lower()
    for pattern, kind in METRIC_TYPES:
        if re.search(pattern, low.rsplit("/", 1)[-1]):
            return kind
    return re.sub(r"[^a-z0-9]+", "_", low).strip("_")


# -- the card ---------------------------------------------------------------------------------------------------
def _title(cfg):
    return cfg.get("pretrained_tag") or cfg["name"]


def rounded(value):
    """A metric as a card shows it: 4 significant digits (evaluation is exact; more digits are noise to a reader)."""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def card_data(cfg):
    """The front matter of a card as ``huggingface_hub.ModelCardData`` (its model-index holds the metrics)."""
    from huggingface_hub import EvalResult, ModelCardData
    mixer = cfg["architecture"]["mixer"]
    task = registry.TASKS[cfg["task"]]
    pipeline, task_type, task_name = task.pipeline_tag, task.index_type, task.index_name
    dataset = cfg.get("dataset") or {}
    tags = ["zoo", "vision-transformer", f"token-mixer-{mixer}", task_type, "safetensors", "pytorch"]
    info = mixers.info(mixer)
    if info.get("arxiv"):
        tags.append(f"arxiv:{info['arxiv']}")  # the Hub's way of linking a paper
    if dataset.get("key"):
        tags.append(dataset["key"])
    results = [EvalResult(task_type=task_type, task_name=task_name, dataset_type=dataset.get("id") or
                          dataset.get("key") or "unknown", dataset_name=dataset.get("name", "unknown"),
                          dataset_split=dataset.get("split"), metric_type=metric_type(k), metric_name=k,
                          metric_value=rounded(v))
               for k, v in (cfg.get("metrics") or {}).items()]
    return ModelCardData(library_name="zoo", license=cfg.get("license") or "apache-2.0", tags=tags,
                         datasets=[dataset["id"]] if dataset.get("id") else None, pipeline_tag=pipeline,
                         model_name=_title(cfg), eval_results=results or None)


def card_metadata(cfg):
    """The front matter of a card as a plain dict (what the Hub indexes)."""
    return card_data(cfg).to_dict()


def _vector(values):
    """Per-channel constants at 6 significant digits: 57.12 / 255 reads 0.224, not 0.22399999999999998."""
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


def _fmt(value):
    return str(rounded(value))


def model_card(cfg):
    """The ``README.md`` text of a published checkpoint, from its ``config.json`` dict."""
    arch, task = cfg["architecture"], cfg["task"]
    mixer, size = arch["mixer"], arch["size"]
    dims = SIZES.get(size, {})
    task_name = registry.TASKS[task].index_name
    dataset = cfg.get("dataset")
    inp = cfg.get("input") or {}
    weights = cfg.get("weights") or {}
    title = _title(cfg)
    out = ["---", card_data(cfg).to_yaml(), "---", "", f"# {title}", ""]
    trained = f", trained on {dataset['name']}" if dataset else " (no training dataset recorded)"
    out.append(f"`{cfg['name']}` for {task_name.lower()}{trained}: the zoo's isotropic ViT-style trunk "
               f"(size `{size}`: width {dims.get('embed_dim', '?')}, {dims.get('depth', '?')} blocks, "
               f"{dims.get('num_heads', '?')} heads) whose token mixer is **{mixer}**, "
               f"{mixers.info(mixer).get('summary') or mixer}.")
    out += ["", "## Model details", "", "| | |", "|---|---|",
            f"| Model | `{cfg['name']}` (mixer `{mixer}`, arch `{arch['arch']}`, size `{size}`) |",
            f"| Task | {task_name} (`{task}`) |"]
    if weights.get("num_params") is not None:
        what = f" (`{weights['part']}`, the part of the model this folder holds)" if weights.get("part") else ""
        out.append(f"| Parameters | {weights['num_params'] / 1e6:.3f} M{what} |")
    if task in ("pcls", "pseg"):
        out.append(f"| Input | {inp.get('num_points', '?')} points of {inp.get('in_dims', 3)} values |")
    elif task == "gen":
        size_txt = "x".join(str(s) for s in inp.get("img_size") or []) or "?"
        out.append(f"| Output | {size_txt} images, {inp.get('out_chans', '?')} channel(s), from "
                   f"{inp.get('z_dim', '?')}-d Gaussian latents |")
    else:
        size_txt = "x".join(str(s) for s in inp.get("img_size") or []) or "?"
        out.append(f"| Input | {size_txt} images, {inp.get('in_chans', '?')} channel(s) |")
        if inp.get("mean") is not None:
            out.append(f"| Normalisation | (x - mean) / std on 0..1 pixels, mean {_vector(inp['mean'])}, "
                       f"std {_vector(inp['std'])} |")
    if cfg.get("num_classes") is not None:
        out.append(f"| Classes | {cfg['num_classes']} |")
    if cfg.get("label_names"):
        out.append(f"| Labels | {', '.join(cfg['label_names'])} |")
    out.append(f"| Constructor arguments | `{json.dumps(cfg['args'], sort_keys=True)}` |")
    if weights.get("sha256"):
        out.append(f"| Weights | `{weights.get('file', 'model.safetensors')}`, sha256 `{weights['sha256']}` |")
    out.append(f"| zoo version | {cfg.get('zoo_version', '?')} |")
    minfo = mixers.info(mixer)
    out += ["", "## Token mixer", "", f"{minfo.get('paper') or mixer}"
            + (f", [arXiv:{minfo['arxiv']}](https://arxiv.org/abs/{minfo['arxiv']})" if minfo.get("arxiv") else "")
            + ".",
            "", "## Training data and recipe", ""]
    if dataset:
        src = f" ([source]({dataset['url']}))" if dataset.get("url") else ""
        lic = f", license {dataset['license']}" if dataset.get("license") else ""
        desc = f": {dataset['description']}" if dataset.get("description") else ""
        out.append(f"- Data: {dataset['name']}{src}{lic}{desc}.")
    else:
        out.append("- Data: not recorded.")
    upstream = cfg.get("upstream") or {}
    if upstream:  # no recipe here: the weights were trained elsewhere
        out.append(f"- Trained elsewhere and converted to the zoo layout: {upstream.get('source') or '?'} "
                   f"({upstream.get('url') or '?'}). License of the weights: {cfg.get('license', '?')}.")
    else:
        out.append(f"- Recipe: `{cfg['training_config']}` (mmengine config; `tools/train.py "
                   f"{cfg['training_config']}` reproduces it)." if cfg.get("training_config") else
                   "- Recipe: not recorded.")
    out += _training_lines(cfg.get("training") or {})
    out += ["", "## Evaluation", ""]
    if upstream.get("metrics_source"):
        out += [f"The numbers below are {upstream['metrics_source']}.", ""]
    if cfg.get("metrics"):
        split = (dataset or {}).get("split", "?")
        out += ["| Metric | Value | Dataset | Split |", "|---|---|---|---|"]
        out += [f"| {k} | {_fmt(v)} | {(dataset or {}).get('name', '?')} | {split} |"
                for k, v in cfg["metrics"].items()]
    else:
        out.append("Not measured.")
    ref = f"hf-hub:{cfg['hf_hub_id']}" if cfg.get("hf_hub_id") else "hf-hub:<org>/<repo>"
    out += ["", "## Usage", "", "```python", "import torch", "import zoo"]
    if task in ("cls", "seg"):
        out.append("from PIL import Image")
    out += ["", f'model = zoo.load("{ref}").eval()']
    if cfg.get("pretrained_tag"):
        out.append(f'# or, through the registry tag: zoo.load("{cfg["name"]}", task="{task}", pretrained=True)')
    if task in ("pcls", "pseg"):
        out.append(f"points = torch.randn(1, {inp.get('num_points', 1024)}, {inp.get('in_dims', 3)})  # (B, N, dims)")
        call = "model(points)" if task == "pcls" else "model(points, torch.tensor([0]))  # + object category (B,)"
        out += ["with torch.no_grad():", f"    logits = {call}"]
    elif task == "gen":
        out += ["with torch.no_grad():", "    images = model.sample(8, seed=0)  # (8, C, H, W) in [-1, 1]"]
    else:
        out += ["# any PIL image or uint8 array: resized, given the model's channels and normalised as it was evaluated",
                "x = zoo.preprocess(Image.open(\"image.png\"), model)  # (1, C, H, W); zoo.resolve_data_config(model)"]
        if task == "cls":
            out += ["with torch.no_grad():", "    probs = model(x).softmax(-1)",
                    "label = model.pretrained_cfg[\"label_names\"][probs.argmax(-1).item()]"
                    if cfg.get("label_names") else "pred = probs.argmax(-1)"]
        else:
            out += ["with torch.no_grad():", "    logits = model(x)  # per-class score maps (B, classes, h, w)"]
    if task != "gen":
        more = ", in_chans=3" if task == "cls" and inp.get("in_chans") == 1 else ""
        out += ["", "# fine-tuning on other data, as timm's create_model(..., pretrained=True, num_classes=5): a fresh "
                "classifier" + (" and an RGB patch kernel" if more else ""),
                f'tuned = zoo.load("{ref}", num_classes=5{more})']
    # The mixer's paper, then DeiT, whose layout and recipe the trunk follows.
    cites = []
    for block in (upstream.get("citation") or "", minfo.get("citation") or "", DEIT_CITATION):
        for entry in (e.strip() for e in block.split("\n\n")):  # one BibTeX entry each, cited once
            if entry and entry not in cites:
                cites.append(entry)
    out += ["```", "", "## Citation", "", "```bibtex", "\n\n".join(cites), "```",
            "", "## Files", "",
            "- `model.safetensors`: weights only (safetensors; no pickle).",
            "- `config.json`: everything needed to rebuild the model (`zoo.load(\"local-dir:/path\")`).",
            "- `README.md`: this card, generated by `zoo.cards` from `config.json`.", ""]
    return "\n".join(out)


# -- MODEL_CARDS.md ---------------------------------------------------------------------------------------------
def primary_metric(task, metrics):
    """``(name, value)`` of the metric a summary shows for ``task``; ``(None, None)`` when none is recorded."""
    for name in registry.TASKS[task].metrics if task in registry.TASKS else ():
        if name in (metrics or {}):
            return name, metrics[name]
    return next(iter((metrics or {}).items()), (None, None))


def _throughput(rec):
    t = (rec or {}).get("throughput") or {}
    return f"{t['value']:.0f} {t['unit']}" if t.get("value") else "?"


def _throughput_conditions(records):
    """How a family's throughput figures were taken, for MODEL_CARDS.md: alone (``--remeasure-throughput``) on one
    named CPU and torch, or beside trainings (indicative only)."""
    runs = [(r or {}).get("throughput") or {} for r in records]
    if runs and all(t.get("alone") for t in runs):
        where = sorted({(t.get("cpu"), t.get("cpu_capability"), t.get("torch")) for t in runs})
        machines = "; ".join(f"{cpu} ({cap}), torch {version}" for cpu, cap, version in where)
        dates = sorted({t.get("date") for t in runs if t.get("date")})
        when = f" on {dates[0]}" + (f" to {dates[-1]}" if len(dates) > 1 else "") if dates else ""
        return (f"measured one model at a time on an otherwise idle machine{when}: {machines}, by "
                f"`python tools/make_weights.py --remeasure-throughput`")
    return ("measured while other trainings shared the machine, so it is indicative only: "
            "`python tools/make_weights.py --remeasure-throughput` measures them again alone")


def seeds_section(entries, seeds):
    """Lines of MODEL_CARDS.md's table over seeds (tags with two or more seeds; empty when there are none)."""
    rows = []
    for tag in sorted(entries):
        runs = (seeds or {}).get(tag) or {}
        if len(runs) < 2:
            continue
        e = entries[tag]
        name, _ = primary_metric(e.task, e.metrics)
        if any(name not in m for m in runs.values()):
            raise ValueError(f"{tag}: not every seed's record has its metric {name!r}")
        values = [runs[s][name] for s in sorted(runs)]
        mean, std = statistics.mean(values), statistics.stdev(values)  # stdev: the n - 1 estimate
        per_seed = ", ".join(f"{s}: {_fmt(runs[s][name])}" for s in sorted(runs))
        rows.append(f"| `{tag}` | {name} | {per_seed} | {mean:.2f} ± {std:.2f} (n={len(values)}) |")
    if not rows:
        return []
    return ["## Seeds", "",
            "The same recipe trained with other seeds (`python tools/make_weights.py --tags TAG --seed N` writes "
            "`results/seeds/seedN/`; only the published run's seed ships). Each value is measured like the card's, "
            "on the run's float16 folder; ± is the sample standard deviation (n - 1).", "",
            "| Tag | Metric | Per seed | Mean ± std |", "|---|---|---|---|"] + rows + [""]


def model_cards_md(entries, results=None, card_link="pretrained/{tag}/README.md", seeds=None):
    """The text of ``MODEL_CARDS.md``.

    Args:
        entries: ``{tag: zoo.pretrained.PretrainedCfg}`` of the checkpoints to list.
        results: ``{tag: record}`` of ``results/metrics/<tag>.json`` (throughput, command, seed), optional.
        card_link: Where each tag's card is, relative to MODEL_CARDS.md.
        seeds: ``{tag: {seed: metrics}}`` of the recipe's runs with several seeds, optional (a table of mean ± std).
    """
    results = results or {}
    out = ["# Model cards", "",
           "<!-- Generated by tools/make_cards.py from pretrained/*/config.json (zoo/pretrained.json) and "
           "results/metrics/*.json. Do not edit by hand: run `make cards`. -->", ""]
    if not entries:
        out += ["No checkpoint is registered yet. `make weights` trains the bundled ones (tools/make_weights.py); "
                "`tools/publish.py` publishes one to the Hub (docs/hub.md); then `make cards` regenerates this file.",
                ""]
        return "\n".join(out)
    by_cell = {}
    for tag, e in entries.items():
        info = registry.model_info(e.model)  # {mixer}_{arch}_{size}: the registry knows the parts
        by_cell.setdefault((f"{info['arch']}_{info['size']}", info["mixer"], e.task), e)
    families = sorted({k[0] for k in by_cell})
    for family in families:
        codes = [m for m in mixers.MIXERS if any(k[:2] == (family, m) for k in by_cell)]
        tasks = [t for t in registry.TASKS if any(k[0] == family and k[2] == t for k in by_cell)]
        heads = []
        for t in tasks:
            e = next(v for k, v in by_cell.items() if k[0] == family and k[2] == t)
            name, _ = primary_metric(t, e.metrics)
            heads.append(f"{t}: {e.dataset_name or e.dataset}, {name}")
        out += [f"## `{{mixer}}_{family}`: one checkpoint per mixer and task", "",
                "Each cell: the card's metric (measured here, by `tools/test.py --json-out` on the evaluation split, "
                "on the published float16 weights), parameters (of the published weights: a GAN's EMA generator), "
                "and inference throughput on one CPU thread (`torch.utils.benchmark` median, recorded by "
                "`tools/make_weights.py` with the CPU and torch version in `results/metrics/<tag>.json`; "
                + _throughput_conditions([results.get(e.tag) for k, e in by_cell.items() if k[0] == family])
                + "); the metric links to the card.", "",
                "| mixer | " + " | ".join(heads) + " |", "|---|" + "---|" * len(tasks)]
        for m in codes:
            cells = []
            for t in tasks:
                e = by_cell.get((family, m, t))
                if e is None:
                    cells.append("-")
                    continue
                _, value = primary_metric(t, e.metrics)
                params = f"{e.num_params / 1e6:.2f} M" if e.num_params else "?"
                cells.append(f"[{_fmt(value)}]({card_link.format(tag=e.tag)}) · {params} · "
                             f"{_throughput(results.get(e.tag))}")
            out.append(f"| `{m}` | " + " | ".join(cells) + " |")
        out.append("")
    out += seeds_section(entries, seeds)
    curves = {tag: (rec or {}).get("curve") for tag, rec in results.items()}
    if any(curves.get(t) for t in entries):
        out += ["## Validation curves", "",
                "The main metric at each validation of the training run (`results/curves/<tag>.json` holds every "
                "logged value); the published checkpoint is the last one.", "",
                "| Tag | Metric | Validations |", "|---|---|---|"]
        for tag in sorted(entries):
            curve = curves.get(tag)
            if curve:
                out.append(f"| `{tag}` | {curve['metric']} at {curve['unit']} | "
                           + ", ".join(f"{s}: {v:.4g}" for s, v in zip(curve["steps"], curve["values"])) + " |")
        out.append("")
    out += ["## Every checkpoint", "",
            "| Tag | Dataset | Metrics | Metrics from | Params | sha256 | Hub | Reproduce |", "|---|---|---|---|---|---|---|---|"]
    for tag in sorted(entries):
        e = entries[tag]
        rec = results.get(tag) or {}
        metrics = ", ".join(f"{k} {_fmt(v)}" for k, v in e.metrics.items())
        alone = (rec.get("segmentor_metrics") or {}).get("metrics")
        if alone:  # tools/make_weights.py --refine: the segmentor before its affinity refinement
            metrics += " (without the affinity refinement: " + ", ".join(f"{k} {_fmt(v)}"
                                                                           for k, v in alone.items()) + ")"
        params = f"{e.num_params / 1e6:.3f} M" if e.num_params else "?"
        hub_ref = f"`{e.hf_hub_id}@{e.revision[:12]}`" if e.revision else "not uploaded (ships in `pretrained/`)"
        command = f"`{rec['command']}`" if rec.get("command") else (e.source or "?")
        out.append(f"| [`{tag}`]({card_link.format(tag=tag)}) | {e.dataset_name or e.dataset or '?'} | {metrics} "
                   f"| {e.metrics_source} | {params} | `{(e.sha256 or '?')[:12]}` | {hub_ref} | {command} |")
    out.append("")
    return "\n".join(out)


def _training_lines(training):
    """The card's lines for the ``training`` block of a config.json: its length (mmengine's epoch and iteration
    counters; an iteration-based loop leaves the epoch counter at 0), where the trunk started, and a segmentor's
    affinity refinement."""
    training = dict(training)
    epoch, it = training.pop("epoch", None), training.pop("iter", None)
    out = []
    if epoch:
        out.append(f"- Trained for: {epoch:,} epochs" + (f" ({it:,} iterations)" if it else ""))
    elif it:
        out.append(f"- Trained for: {it:,} iterations")
    init = training.pop("trunk_init", None)
    if init:  # {"source": TAG or file, "skip": [key patterns left at their fresh initialisation]}
        skipped = ", ".join(f"`{k}`" for k in init.get("skip") or [])
        out.append(f"- Trunk initialised from: `{init['source']}`" + (f", except {skipped}" if skipped else ""))
    refine = training.pop("refine", None)
    if refine:  # tools/make_weights.py --refine: tasks.seg.affinity's record, as save_refined keeps it
        train, tune, chosen = refine.get("train") or {}, refine.get("tuning") or {}, refine.get("chosen") or {}
        out.append(f"- Affinity refinement (`python -m tasks.seg.affinity`): a head trained {refine.get('iters'):,} "
                   f"steps on the frozen segmentor over the first {train.get('scenes'):,} training scenes of "
                   f"`{train.get('root')}`; at inference the class probabilities walk {chosen.get('steps')} steps "
                   f"along its affinities to the power {chosen.get('beta')}, a setting chosen on "
                   f"{tune.get('scenes')} scenes of `{tune.get('root')}` that neither network trained on")
    out += [f"- {key}: {value}" for key, value in training.items()]
    return out

