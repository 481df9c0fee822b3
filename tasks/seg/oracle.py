"""How far naming alone can take a scenes segmentor: predictors that know every item's pixels exactly.

``python -m tasks.seg.oracle [--classifier sa_vit_micro.cls_fmnist] [--data data/fashion_scenes]`` replays the
validation scenes from ``tools/make_scenes.py``'s generator (the seed and generator settings of ``make scenes``; the
replayed label maps must equal the PNGs under ``--data``, or it stops), which gives every item's Fashion-MNIST image,
where it was pasted and which of its pixels stay visible under the items pasted after it. Three predictors then
label the background exactly and paint one class over each item's visible pixels:

- **true class**: the item's own label. Its mIoU is 100; it checks the replay and the scoring.
- **classifier, whole item**: a Fashion-MNIST classifier's top-1 on the item's whole 28x28 image, the parts hidden
  by other items included (information no segmentor has): the mIoU that a perfect finder with this classifier's
  naming would reach.
- **classifier, visible part**: the same classifier on the item's 28x28 image with the pixels that are hidden in the
  scene (or fall below the scenes' mask threshold) set to 0: what the visible part alone tells this classifier.
  The classifier never saw such fragments in training, so this is a pessimistic estimate of what the visible part
  allows.

With ``--segmentor TAG`` (a scenes checkpoint) three more split its mIoU into finding and naming:

- **segmentor**: its own prediction (``tools/test.py``'s mIoU, recomputed here);
- **segmentor's names, exact finding**: the item pixels take the segmentor's best item class, the background is
  exact: its naming alone, to read against the classifier's;
- **segmentor's finding, true names**: the pixels it calls an item take their true class where they are one (and
  its class where they are background), the pixels it calls background stay background: its finding alone;
- **segmentor's finding, classifier's names**: the same with the classifier's visible-part class in place of the
  true one: what the segmentor would score if it named items as the classifier names their visible parts.

Each is scored with ``tasks.seg.errors`` (the same confusion matrix as ``tools/test.py``'s mIoU, and the same
per-region majority vote by visible size), so its numbers read directly against a segmentor's breakdown.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
from PIL import Image

from tasks.seg import errors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generator():
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_scenes
    return make_scenes


def replay(num, seed=0, split="validation", size=64, threshold=40, fmnist=None, **compose_kwargs):
    """The first ``num`` scenes of ``split`` as ``make_scenes`` wrote them, with what it pasted.

    Returns:
        ``(label maps, items)``: ``num`` (size, size) uint8 maps, and per scene a list of ``(image (28, 28) uint8,
        class, visible (size, size) bool, visible (28, 28) bool)`` in paint order; the first ``visible`` is the
        item's pixels in the scene that no later item covers, the second the same pixels in the item's own frame.
    """
    gen = _generator()
    images, labels = gen.load_split(fmnist or gen.FMNIST, "t10k" if split == "validation" else "train")
    rng = gen.split_rng(seed, split)
    maps, scenes = [], []
    for _ in range(num):
        placed = []
        _, label = gen.compose(rng, images, labels, size=size, threshold=threshold, placed=placed, **compose_kwargs)
        owner = np.full((size, size), -1, np.int64)  # which item each pixel shows, as compose painted them
        for k, (i, side, y, x) in enumerate(placed):
            mask = np.asarray(Image.fromarray(images[i]).resize((side, side), Image.BILINEAR), np.float32) > threshold
            owner[y:y + side, x:x + side][mask] = k
        items = []
        for k, (i, side, y, x) in enumerate(placed):
            visible = owner == k
            own = Image.fromarray(visible[y:y + side, x:x + side].astype(np.uint8) * 255).resize((28, 28),
                                                                                                 Image.NEAREST)
            items.append((images[i], int(labels[i]) + 1, visible, np.asarray(own) > 0))
        maps.append(label)
        scenes.append(items)
    return maps, scenes


def paint(scenes, names, size=64):
    """Label maps with each item's visible pixels set to its name (``names``: one class per item, in the order of
    ``scenes``' items), everything else background (0)."""
    out, n = [], 0
    for items in scenes:
        pred = np.zeros((size, size), np.int64)
        for _, _, visible, _ in items:
            pred[visible] = names[n]
            n += 1
        out.append(pred)
    return out


def classify(model, crops, batch=500):
    """A Fashion-MNIST classifier's top-1 (as a scenes class, 1..10) for (N, 28, 28) uint8 ``crops``."""
    import torch

    import zoo
    out = []
    for i in range(0, len(crops), batch):
        x = zoo.preprocess(np.asarray(crops[i:i + batch])[:, None], model)
        with torch.no_grad():
            out.append(model(x).argmax(1).numpy() + 1)
    return np.concatenate(out)


def analyse(classifier="sa_vit_micro.cls_fmnist", data_root="data/fashion_scenes", split="validation", seed=0,
            min_pixels=20, segmentor=None):
    """``{predictor: tasks.seg.errors.breakdown}`` for the predictors of the module docstring (the segmentor's
    three only with ``segmentor``, a scenes tag or ``local-dir:`` folder)."""
    import zoo
    paths = sorted(glob.glob(os.path.join(data_root, "annotations", split, "*.png")))
    if not paths:
        raise FileNotFoundError(f"no label maps in {os.path.join(data_root, 'annotations', split)}; make scenes "
                                f"writes them")
    gts = [np.asarray(Image.open(p)) for p in paths]
    maps, scenes = replay(len(gts), seed=seed, split=split, size=gts[0].shape[0])
    for p, gt, m in zip(paths, gts, maps):
        if not np.array_equal(gt, m):
            raise ValueError(f"{p} is not what make_scenes.py --seed {seed} writes: the replay needs the scenes of "
                             f"`make scenes` (its seed, size and item settings)")
    items = [it for s in scenes for it in s]
    truth = [c for _, c, _, _ in items]
    model = zoo.load(classifier).eval()
    names = {"true class": truth,
             "classifier, whole item": classify(model, [img for img, _, _, _ in items]),
             "classifier, visible part": classify(model, [img * own for img, _, _, own in items])}
    size = gts[0].shape[0]
    preds = {key: paint(scenes, named, size=size) for key, named in names.items()}
    item_names = {}
    if segmentor is not None:
        labels, best_item = errors.predict(zoo.load(segmentor).eval(), [
            p.replace(os.sep + "annotations" + os.sep, os.sep + "images" + os.sep)[:-len(".png")] + ".jpg"
            for p in paths])
        preds["segmentor"] = labels
        # the per-region vote counts item classes only (errors.item_votes): the segmentor's best item class
        item_names = {"segmentor": best_item, "segmentor's names, exact finding": best_item}
        preds["segmentor's names, exact finding"] = [np.where(gt > 0, b, 0) for gt, b in zip(gts, best_item)]
        for key, named in (("true names", gts), ("classifier's names", preds["classifier, visible part"])):
            preds[f"segmentor's finding, {key}"] = [np.where(lab > 0, np.where(gt > 0, n, lab), 0)
                                                    for gt, lab, n in zip(gts, labels, named)]
            item_names[f"segmentor's finding, {key}"] = named
    shown = np.array([vis.any() for _, _, vis, _ in items])  # items wholly hidden by later ones name no pixel
    out = {}
    for key, pred in preds.items():
        conf = errors.confusion(gts, pred, 11)
        votes = errors.item_votes(gts, item_names.get(key, pred), 11, min_pixels=min_pixels)
        out[key] = errors.breakdown(conf, votes)
        if key in names:
            hit = (np.asarray(names[key]) == np.asarray(truth))[shown]
            out[key].update(visible_items=int(shown.sum()), visible_items_top1=100 * float(hit.mean()))
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--classifier", default="sa_vit_micro.cls_fmnist", help="a cls tag or local-dir: folder")
    p.add_argument("--data", default="data/fashion_scenes")
    p.add_argument("--split", default="validation")
    p.add_argument("--seed", type=int, default=0, help="the seed the scenes were made with")
    p.add_argument("--min-pixels", type=int, default=20)
    p.add_argument("--segmentor", help="a scenes tag or local-dir: folder, e.g. sa_vit_micro.seg_scenes: split "
                                       "its mIoU into finding and naming")
    a = p.parse_args()
    res = analyse(a.classifier, a.data, a.split, a.seed, a.min_pixels, a.segmentor)
    print(json.dumps(errors._rounded(dict(classifier=a.classifier, **res)), indent=1))
