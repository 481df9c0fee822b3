"""Generate MODEL_CARDS.md from the registry's pretrained tags and the measured results (never edit it by hand).

    python tools/make_cards.py            # rewrite MODEL_CARDS.md
    python tools/make_cards.py --check    # exit 1 if MODEL_CARDS.md is stale (tests run this)

Inputs: ``zoo.registry.PRETRAINED`` (what ``zoo.load(..., pretrained=True)`` can download) and
``results/<tag>.json`` (written by ``tools/publish.py``: the published config.json plus ``hf_hub_id`` and
``revision``). Every registry tag needs its results file, and both must agree on repo, revision and sha256.
"""
import argparse
import glob
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from zoo import cards, registry  # noqa: E402

OUTPUT = os.path.join(ROOT, "MODEL_CARDS.md")
RESULTS = os.path.join(ROOT, "results")


def load_records(results_dir=RESULTS, pretrained=None):
    """Results records of the registry's tags, sorted by tag; a missing or disagreeing record is an error."""
    pretrained = registry.PRETRAINED if pretrained is None else pretrained
    records = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        with open(path) as f:
            rec = json.load(f)
        tag = rec.get("pretrained_tag")
        if f"{tag}.json" != os.path.basename(path):
            raise SystemExit(f"{path}: pretrained_tag {tag!r} does not match the file name")
        records[tag] = rec
    problems = []
    for tag, entry in sorted(pretrained.items()):
        rec = records.get(tag)
        if rec is None:
            problems.append(f"registry tag {tag} has no {os.path.relpath(results_dir, ROOT)}/{tag}.json")
            continue
        for key, got in (("hf_hub_id", rec.get("hf_hub_id")), ("revision", rec.get("revision")),
                         ("sha256", (rec.get("weights") or {}).get("sha256"))):
            if entry.get(key) != got:
                problems.append(f"{tag}: registry {key} {entry.get(key)!r} != results {got!r}")
    if problems:
        raise SystemExit("registry and results disagree:\n  " + "\n  ".join(problems))
    return [records[t] for t in sorted(pretrained)]


def render(results_dir=RESULTS, pretrained=None):
    """The text of MODEL_CARDS.md."""
    return cards.model_cards_md(load_records(results_dir, pretrained))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if MODEL_CARDS.md differs from the generated text")
    p.add_argument("--results-dir", default=RESULTS)
    p.add_argument("--output", default=OUTPUT)
    args = p.parse_args(argv)
    text = render(args.results_dir)
    if args.check:
        current = open(args.output).read() if os.path.isfile(args.output) else None
        if current != text:
            print(f"{args.output} is stale: run `make cards` (python tools/make_cards.py)", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
