"""``make demo``: load the bundled checkpoints, score every mixer on every task, print the table, draw pictures.

For each of the four mixers and five tasks, the bundled ``{mixer}_vit_micro.{task}_{dataset}`` checkpoint is loaded
with ``zoo.load(tag)`` (from ``pretrained/``, offline) and scored with its own config on the task's evaluation data,
exactly as ``tools/test.py`` would. The table shows the task's main metric; pictures of what each model does go to
``--out`` (default ``work_dirs/demo``):

- ``gen_<mixer>.png``: 64 samples of the generator (seed 0);
- ``seg_<mixer>.png``: validation scenes, their labels and the prediction, row by row;
- ``pseg_<mixer>.png``: test shapes coloured by predicted part (top) and by label (bottom).

The generator is scored here in the features of the small Fashion-MNIST classifier on ``--gen-samples`` images
(``FID(fmnist-clf)``, a minute); its card's Inception FID uses 10,000 images (``tools/test.py``, slower on a CPU).
Training from scratch is ``make demo-train`` (``tools/train_demo.py``).

    python tools/demo.py                              # everything (a few minutes on 2 cores)
    python tools/demo.py --tasks cls pcls --mixers sa ea
"""
import argparse
import json
import os
import os.path as osp
import sys
import time

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tasks.common import pictures  # noqa: E402
from zoo import cards, mixers, registry  # noqa: E402
from zoo.pretrained import Tag, parse_tag  # noqa: E402

MIXERS = tuple(mixers.MIXERS)  # the built-in mixers (zoo.mixers), in their order
TASKS = tuple(registry.TASKS)
# the dataset of each task's bundled micro checkpoints (pretrained/)
DATASETS = {"cls": "fmnist", "seg": "scenes", "gen": "fmnist", "pcls": "shapes", "pseg": "shapes"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mixers", nargs="+", default=list(MIXERS), choices=MIXERS)
    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    p.add_argument("--out", default=osp.join(ROOT, "work_dirs", "demo"), help="folder for the pictures and table")
    p.add_argument("--gen-samples", type=int, default=2000, help="generated images scored per GAN")
    p.add_argument("--max-samples", type=int, default=None, help="score only the first N evaluation samples")
    return p.parse_args(argv)


def _gen_options():
    from tasks.common.evaluate import SLICE_OPTIONS
    return SLICE_OPTIONS["gen"]


def seg_picture(runner, n=6):
    """Rows of scene | label | prediction for the first ``n`` evaluation scenes."""
    colours = pictures.palette(256)
    rows = []
    model = runner.model
    model.eval()
    for k, batch in enumerate(runner.test_dataloader):
        if k >= n:
            break
        with torch.no_grad():
            out = model.test_step(batch)[0]
        img = batch["inputs"][0].flip(0)  # BGR (mmcv loading) -> RGB
        gt = out.gt_sem_seg.data[0].numpy()
        pred = out.pred_sem_seg.data[0].numpy()
        rows += [pictures.to_rgb(img), pictures.label_map(gt, colours), pictures.label_map(pred, colours)]
    return pictures.tile([x.repeat(3, 0).repeat(3, 1) for x in rows], ncol=3)  # 64-px scenes, shown 3x


def pseg_picture(runner, n=6):
    """Test shapes coloured by predicted part (top row) and by label (bottom row)."""
    colours = pictures.palette(50, seed=1)
    model = runner.model
    model.eval()
    dataset = runner.test_dataloader.dataset
    step = max(1, len(dataset) // n)  # spread over the categories (the split is sorted by category)
    preds, labels = [], []
    for i in range(0, step * n, step):
        sample = dataset[i]
        batch = dict(inputs=sample["inputs"][None], data_samples={k: v[None] for k, v in sample["data_samples"].items()})
        with torch.no_grad():
            out = model.test_step(batch)[0]
        pts = sample["inputs"][:, :3].numpy()
        preds.append(pictures.point_cloud(pts, out["seg_logits"].argmax(-1).numpy(), colours))
        labels.append(pictures.point_cloud(pts, out["seg"].numpy(), colours))
    return pictures.tile(preds + labels, ncol=len(preds))


def run_one(tag, task, args):
    from tasks.common.evaluate import build_runner, config_of
    options = _gen_options() if task == "gen" else None
    limit = args.gen_samples if task == "gen" else args.max_samples
    runner = build_runner(config_of(tag), tag, work_dir=osp.join(args.out, "runs", tag), max_samples=limit,
                          cfg_options=options)
    runner.logger.setLevel("WARNING")
    t0 = time.perf_counter()
    metrics = {k: float(v) for k, v in runner.test().items()}
    seconds = time.perf_counter() - t0
    mixer = registry.model_info(parse_tag(tag).model)["mixer"]
    picture = None
    if task == "seg":
        picture = seg_picture(runner)
    elif task == "pseg":
        picture = pseg_picture(runner)
    elif task == "gen":
        target = runner.model.module if hasattr(runner.model, "module") else runner.model
        picture = pictures.sample_grid(target.zoo_model, n=64, seed=0)
    path = pictures.save_png(picture, osp.join(args.out, f"{task}_{mixer}.png")) if picture is not None else None
    return dict(tag=tag, metrics=metrics, seconds=round(seconds, 1), picture=path)


def table(results, tasks, mixers):
    header = ["mixer"] + [f"{t} ({DATASETS[t]})" for t in tasks]
    rows = [header]
    for m in mixers:
        row = [m]
        for t in tasks:
            r = results.get((m, t))
            if r is None:
                row.append("-")
                continue
            name, value = cards.primary_metric(t, r["metrics"])
            row.append(f"{name} {value:.2f}")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    results, missing = {}, []
    for task in args.tasks:
        for mixer in args.mixers:
            tag = str(Tag(f"{mixer}_vit_micro", task, DATASETS[task]))
            if tag not in registry.PRETRAINED:
                missing.append(tag)
                continue
            print(f"== {tag}", flush=True)
            results[(mixer, task)] = run_one(tag, task, args)
    text = table(results, args.tasks, args.mixers)
    print("\n" + text)
    if "gen" in args.tasks:
        print(f"\ngen: FID(fmnist-clf) of {args.gen_samples} samples against as many t10k images; the cards' "
              f"FID(inception-v3) uses 10,000 (tools/test.py)")
    if missing:
        print(f"\nnot bundled (make weights trains them): {', '.join(missing)}")
    pics = [r["picture"] for r in results.values() if r["picture"]]
    if pics:
        print(f"\npictures: {', '.join(osp.relpath(p) for p in pics)}")
    with open(osp.join(args.out, "results.json"), "w") as f:
        json.dump([dict(mixer=m, task=t, **r) for (m, t), r in results.items()], f, indent=1)
    return 0 if results else 1


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    sys.exit(main())
