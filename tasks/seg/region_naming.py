"""Segment, then name: a fragment-trained classifier renames the regions a scenes segmentor finds.

``python -m tasks.seg.oracle`` showed that a classifier trained on item fragments, painted over a segmentor's masks,
would score 60-62 mIoU where the segmentors score 48-51: but it named each item from the item's exact outline, which
the oracle takes from the generator. This probe asks what is left of that gain when the outline must come from the
segmentor's own label map, as it would in a two-stage model. For every validation scene it

1. runs the segmentor (whole image, as ``tools/test.py``), keeping its per-pixel class probabilities;
2. cuts its item pixels into regions by one of ``GROUPINGS``:

   - *exact items*: each item's visible pixels (from the generator's replay; the oracle's outline, for reference),
     restricted to the pixels the segmentor calls an item;
   - *class components*: the 8-connected components of each item class of the segmentor's map;
   - *class components, 2-px gaps joined*: the same, with components of one class at most 2 pixels apart joined
     (an item that its own mask or a thin occluder cuts in two stays one region);
   - *item components*: the 8-connected components of everything the segmentor calls an item, whatever its class;

3. shows the classifier each region as the fragment view it was trained on (``scene_crop``: the region's pixels of
   the scene alone, in their own square box, at 28x28) and paints the region with
   ``argmax(classifier log-probabilities + alpha * the segmentor's mean log-probabilities over the region)`` for each
   ``alpha`` (0: the classifier alone; ``inf``: the segmentor's own vote over the region, the classifier unused).
   Background pixels keep the segmentor's label.

The mIoU of each grouping and alpha is read against the segmentor's own. Alpha is swept on the validation scenes
themselves, so the best value of a row is an optimistic one. The classifier is a ``zoo.load`` name (a folder written by
``python -m tasks.seg.oracle --save-fragment-trained DIR``, e.g. ``local-dir:DIR/own_box``), or, with
``--fragment-epochs N``, the bundled classifier of the segmentor's mixer trained N epochs on the training items' own
boxes as the oracle trains it (``oracle.fragment_trained``).
"""
import argparse
import json

import numpy as np

from tasks.seg import errors, oracle

ALPHAS = (0.0, 1.0, 2.0, 4.0, float("inf"))
GROUPINGS = ("exact items", "class components", "class components, 2-px gaps joined", "item components")
_EIGHT = np.ones((3, 3), bool)


def scene_crop(image, mask):
    """The fragment view of ``mask``'s pixels in the RGB scene ``image`` (H, W, 3): their grey level (the brightest
    channel, which the generator's colouring scales by a constant per item) stretched so the region's brightest pixel
    is 255, cut out by the region's own square box and resized to 28x28 (``oracle._own_box``)."""
    grey = np.asarray(image).max(-1).astype(np.float32)
    peak = float(grey[mask].max()) if mask.any() else 0.0
    return oracle._own_box(grey * (255.0 / max(peak, 1.0)), mask)


def regions(label_map, grouping, items=None):
    """The item regions (bool masks) of a segmentor's ``label_map`` under ``grouping`` (``GROUPINGS``); ``items``
    (that scene's ``oracle.Item`` s) only for *exact items*."""
    from scipy import ndimage
    found = label_map > 0
    if grouping == "exact items":
        if items is None:
            raise ValueError("the exact items grouping needs the scene's replayed items")
        return [it.visible & found for it in items if (it.visible & found).any()]
    if grouping == "item components":
        comp, n = ndimage.label(found, structure=_EIGHT)
        return [comp == k for k in range(1, n + 1)]
    if grouping not in GROUPINGS:
        raise ValueError(f"unknown grouping {grouping!r}; choose one of {GROUPINGS}")
    gap = 2 if grouping.endswith("gaps joined") else 0
    out = []
    for c in np.unique(label_map[found]):
        mask = label_map == c
        # Grown by gap // 2 pixels, components at most `gap` pixels apart touch; the regions keep only the class's
        # own pixels.
        grown = ndimage.binary_dilation(mask, _EIGHT, iterations=gap // 2) if gap else mask
        comp, n = ndimage.label(grown, structure=_EIGHT)
        out += [(comp == k) & mask for k in range(1, n + 1)]
    return out


def rename(labels, probs, images, regions_per_scene, classifier, alphas=ALPHAS, batch=500):
    """``{alpha: label maps}``: the segmentor's ``labels`` with every region of ``regions_per_scene`` painted as the
    module docstring says. ``probs``: the segmentor's (K, H, W) class probabilities per scene."""
    import torch

    import zoo
    where = [(n, m) for n, regs in enumerate(regions_per_scene) for m in regs]
    if not where:
        return {a: [np.array(lab) for lab in labels] for a in alphas}
    x = zoo.preprocess(np.stack([scene_crop(images[n], m) for n, m in where])[:, None], classifier)
    with torch.no_grad():
        clf = torch.cat([classifier(x[i:i + batch]).float().log_softmax(1) for i in range(0, len(x), batch)]).numpy()
    seg = np.stack([np.log(probs[n][1:, m] + 1e-8).mean(1) for n, m in where])  # (regions, item classes)
    out = {}
    for a in alphas:
        names = np.argmax(seg if np.isinf(a) else clf + a * seg, 1) + 1
        maps = [np.array(lab) for lab in labels]
        for (n, m), name in zip(where, names):
            maps[n][m & (maps[n] > 0)] = name
        out[a] = maps
    return out


def predict_probs(model, paths, batch=50):
    """(label maps, (K, H, W) float32 class probabilities) per image of ``paths``, whole image as ``tools/test.py``."""
    import torch
    from PIL import Image

    import zoo
    labels, probs = [], []
    for i in range(0, len(paths), batch):
        x = zoo.preprocess([Image.open(p) for p in paths[i:i + batch]], model)
        with torch.no_grad():
            p = model(x).float().softmax(1).numpy()
        labels += list(p.argmax(1))
        probs += list(p)
    return labels, probs


def analyse(segmentor, classifier=None, data_root="data/fashion_scenes", split="validation", seed=0,
            fragment_epochs=0, fragment_scenes=10000, alphas=ALPHAS, groupings=GROUPINGS, min_pixels=20):
    """``{"segmentor": breakdown, grouping: {f"alpha {a}": breakdown}}`` (``tasks.seg.errors.breakdown``)."""
    from PIL import Image

    import zoo
    if classifier is None and not fragment_epochs:
        raise ValueError("give a fragment-trained classifier, or fragment_epochs > 0 to train one")
    seg = zoo.load(segmentor).eval()
    if classifier is None:
        mixer = seg.pretrained_cfg["tag"].split("_vit_")[0] if seg.pretrained_cfg.get("tag") else None
        if mixer is None:
            raise ValueError(f"{segmentor} has no tag to take its mixer's classifier from; give --classifier")
        classifier = oracle.fragment_trained(zoo.load(f"{mixer}_vit_micro.cls_fmnist").eval(),
                                             "visible part in its own box", seed=seed, num_scenes=fragment_scenes,
                                             epochs=fragment_epochs, size=64)
    elif isinstance(classifier, str):
        classifier = zoo.load(classifier)
    classifier = classifier.float().eval()
    paths, gts, scenes = oracle.replay_written(data_root, split, seed)
    labels, probs = predict_probs(seg, paths)
    images = [np.asarray(Image.open(p).convert("RGB")) for p in paths]

    def score(maps):
        return errors.breakdown(errors.confusion(gts, maps, 11), errors.item_votes(gts, maps, 11,
                                                                                   min_pixels=min_pixels))
    out = {"segmentor": score(labels)}
    for g in groupings:
        regs = [regions(lab, g, items) for lab, items in zip(labels, scenes)]
        renamed = rename(labels, probs, images, regs, classifier, alphas)
        out[g] = {f"alpha {a}": dict(score(m), regions=sum(map(len, regs))) for a, m in renamed.items()}
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("segmentor", help="a scenes tag or local-dir: folder, e.g. sa_vit_micro.seg_scenes")
    p.add_argument("--classifier", help="a fragment-trained classifier (local-dir:DIR/own_box of oracle's "
                                        "--save-fragment-trained)")
    p.add_argument("--fragment-epochs", type=int, default=0,
                   help="instead, train the mixer's bundled classifier this many epochs on the training fragments")
    p.add_argument("--fragment-scenes", type=int, default=10000)
    p.add_argument("--data", default="data/fashion_scenes")
    p.add_argument("--split", default="validation")
    p.add_argument("--seed", type=int, default=0, help="the seed the scenes were made with")
    a = p.parse_args()
    if bool(a.classifier) == bool(a.fragment_epochs):
        p.error("give exactly one of --classifier and --fragment-epochs")
    res = analyse(a.segmentor, a.classifier, a.data, a.split, a.seed, a.fragment_epochs, a.fragment_scenes)
    print(json.dumps(errors.rounded(dict(segmentor_tag=a.segmentor, classifier=a.classifier,
                                         fragment_epochs=a.fragment_epochs, **res)), indent=1))
