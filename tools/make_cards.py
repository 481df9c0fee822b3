"""Generate the pretrained index, the bundled model cards and MODEL_CARDS.md from data (never edit them by hand).

    python tools/make_cards.py            # rewrite zoo/pretrained.json, pretrained/*/README.md, MODEL_CARDS.md
    python tools/make_cards.py --check    # exit 1 if any of them is stale (the tests run this)

Inputs:

- ``pretrained/<tag>/config.json``: the published folders of the checkpoints trained here (written by
  ``tools/make_weights.py`` through ``tools/publish.py``). Each becomes one ``zoo.pretrained.PretrainedCfg`` in
  ``zoo/pretrained.json``, which ``zoo.registry.PRETRAINED`` reads, and its card ``README.md`` is re-rendered
  from it (a card is a function of ``config.json``).
- ``results/<tag>.json`` (written by ``tools/publish.py`` after an upload): the Hub commit that pins the tag; a
  tag uploaded but not bundled (a large checkpoint) is registered from this record alone.
- ``results/metrics/<tag>.json`` (written by ``tools/make_weights.py``): the command, seed and evaluation
  throughput shown in MODEL_CARDS.md.
- ``results/seeds/seed<N>/metrics/<tag>.json``: the same recipe trained with another seed (not published); MODEL_CARDS.md
  reports mean and standard deviation over the seeds of each tag.
"""
import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from zoo import cards, pretrained, registry  # noqa: E402

OUTPUT = os.path.join(ROOT, "MODEL_CARDS.md")
RESULTS = os.path.join(ROOT, "results")
BUNDLED = os.path.join(ROOT, "pretrained")


def _read_json(path):
    with open(path) as f:
        return json.load(f)


def load_entries(bundled_dir=BUNDLED, results_dir=RESULTS):
    """``{tag: PretrainedCfg}`` of the published folders under ``bundled_dir``; a folder must be named by its tag."""
    entries = {}
    for path in sorted(glob.glob(os.path.join(bundled_dir, "*", "config.json"))):
        if not pretrained.looks_like_tag(os.path.basename(os.path.dirname(path))) or path.endswith(".new/config.json"):
            continue  # a folder being written (tools/make_weights.py stages into <tag>.new), not a checkpoint
        cfg = _read_json(path)
        tag = cfg.get("pretrained_tag")
        if tag != os.path.basename(os.path.dirname(path)):
            raise SystemExit(f"{path}: pretrained_tag {tag!r} does not match its folder name")
        upload = os.path.join(results_dir, f"{tag}.json")
        revision = None
        if os.path.isfile(upload):  # uploaded: the record pins the commit and must hold the same weights
            rec = _read_json(upload)
            if (rec.get("weights") or {}).get("sha256") != cfg["weights"]["sha256"]:
                raise SystemExit(f"{upload} records other weights than {path}; publish again or remove the record")
            revision = rec.get("revision")
        entries[tag] = pretrained.PretrainedCfg.from_published(cfg, revision=revision)
    # Checkpoints on the Hub only (too large to ship): the upload record holds their config.json.
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        rec = _read_json(path)
        tag = rec.get("pretrained_tag")
        if f"{tag}.json" != os.path.basename(path):
            raise SystemExit(f"{path}: pretrained_tag {tag!r} does not match the file name")
        if tag not in entries:
            if not rec.get("revision"):
                raise SystemExit(f"{path}: an upload record without the commit (revision) that pins it")
            entries[tag] = pretrained.PretrainedCfg.from_published(rec, revision=rec["revision"])
    return entries


def curve_summary(tag, records):
    """The main metric at each validation of a training log (mmengine ``scalars.json`` records), or ``None``."""
    task = pretrained.parse_tag(tag).task
    for name in registry.TASKS[task].metrics:
        points, last_iter = [], None
        for r in records:
            if name in r:
                # logs written before the gen runtime set log_metric_by_epoch=False carry step 0 (the epoch) on the
                # validation of an iteration loop: take the iteration of the training record before it instead
                step = last_iter if task in ("seg", "gen") and r["step"] == 0 and last_iter else r["step"]
                points.append((step, r[name]))
            elif "iter" in r:
                last_iter = r["iter"]
        if points:  # mmengine logs a validation at its epoch (epoch loops) or iteration (iteration loops)
            unit = "iteration" if task in ("seg", "gen") else "epoch"
            return dict(metric=name, unit=unit, steps=[p for p, _ in points], values=[v for _, v in points])
    return None


def load_results(results_dir=RESULTS):
    """``{tag: record}`` of ``results/metrics/*.json``, with ``curve`` from ``results/curves/<tag>.json``."""
    out = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "metrics", "*.json"))):
        tag = os.path.basename(path)[:-5]
        rec = _read_json(path)
        curve_path = os.path.join(results_dir, "curves", f"{tag}.json")
        if os.path.isfile(curve_path):
            rec["curve"] = curve_summary(tag, _read_json(curve_path))
        out[tag] = rec
    return out


def load_seeds(results_dir=RESULTS, results=None):
    """``{tag: {seed: metrics}}``: the published run (``results/metrics/<tag>.json``) and the same recipe run with
    other seeds (``results/seeds/seed<N>/metrics/<tag>.json``, written by ``tools/make_weights.py --seed N``).
    ``results``: ``load_results(results_dir)`` when the caller has it already."""
    out = {}
    for tag, rec in (load_results(results_dir) if results is None else results).items():
        if rec.get("metrics"):
            out.setdefault(tag, {})[rec.get("seed", 0)] = rec["metrics"]
    for path in sorted(glob.glob(os.path.join(results_dir, "seeds", "seed*", "metrics", "*.json"))):
        rec, folder = _read_json(path), os.path.basename(os.path.dirname(os.path.dirname(path)))
        tag = os.path.basename(path)[:-5]
        if folder != f"seed{rec.get('seed')}":
            raise SystemExit(f"{path}: seed {rec.get('seed')!r} does not match its folder {folder}")
        if rec.get("seed") in out.get(tag, {}):
            raise SystemExit(f"{path}: seed {rec['seed']} of {tag} is also the published run's seed")
        out.setdefault(tag, {})[rec["seed"]] = rec["metrics"]
    return out


def outputs(bundled_dir=BUNDLED, results_dir=RESULTS, output=OUTPUT, index=pretrained.INDEX_PATH):
    """``{path: text}`` of every generated file."""
    entries = load_entries(bundled_dir, results_dir)
    results = load_results(results_dir)
    files = {index: pretrained.index_text(entries),
             output: cards.model_cards_md(entries, results, seeds=load_seeds(results_dir, results))}
    for tag in entries:
        folder = os.path.join(bundled_dir, tag)
        files[os.path.join(folder, "README.md")] = cards.model_card(_read_json(os.path.join(folder, "config.json")))
    return files


def render(results_dir=RESULTS, bundled_dir=BUNDLED):
    """The text of MODEL_CARDS.md."""
    return outputs(bundled_dir, results_dir)[OUTPUT]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if a generated file differs from its data")
    args = p.parse_args(argv)
    files = outputs()
    stale = []
    for path, text in files.items():
        current = open(path).read() if os.path.isfile(path) else None
        if current != text:
            stale.append(path)
            if not args.check:
                with open(path, "w") as f:
                    f.write(text)
    rel = [os.path.relpath(p, ROOT) for p in stale]
    if args.check:
        if stale:
            print(f"stale: {', '.join(rel)}: run `make cards` (python tools/make_cards.py)", file=sys.stderr)
            return 1
        print(f"{len(files)} generated files are up to date")
        return 0
    print(f"wrote {', '.join(rel) or 'nothing (all up to date)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
