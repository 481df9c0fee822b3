"""How far naming alone can take a scenes segmentor: predictors that know every item's pixels exactly.

``python -m tasks.seg.oracle [--classifier sa_vit_micro.cls_fmnist] [--data data/fashion_scenes]`` replays the
validation scenes from ``tools/make_scenes.py``'s generator (the seed and generator settings of ``make scenes``; the
replayed label maps must equal the PNGs under ``--data``, or it stops), which gives every item's Fashion-MNIST image,
where it was pasted and which of its pixels stay visible under the items pasted after it. Its predictors label the
background exactly and paint one class over each item's visible pixels:

- **true class**: the item's own label. Its mIoU is 100; it checks the replay and the scoring.
- **classifier, V**: a Fashion-MNIST classifier's top-1 on one of three views ``V`` of the item (``VIEWS``), each
  28x28:
  - *whole item*: its whole Fashion-MNIST image, the parts hidden by other items included (what no segmentor sees);
  - *visible part in the item's frame*: that image with the pixels hidden in the scene (or below the scenes' mask
    threshold) set to 0. The frame still tells where the item is and how large: more than a segmentor knows;
  - *visible part in its own box*: the visible pixels at the scene's scale, cut out by the square around them and
    resized: the fragment alone, nothing of where its item is.
  The bundled classifiers never saw fragments in training, so on the last two they err low.
- **fragment-trained classifier, V** (``--fragment-epochs N``): a copy of the classifier trained N epochs more on
  view ``V`` of the items of the first ``--fragment-scenes`` training scenes (replayed the same way: the training
  split's items, as the segmentors saw them): a classifier of the same size that has learnt what fragments look like.
  ``--save-fragment-trained DIR`` keeps each as a published folder, ``DIR/item_frame`` and ``DIR/own_box``
  (``FRAGMENT_FOLDERS``), which ``zoo.load("local-dir:DIR/own_box")`` loads and a seg config can start its trunk
  from (``init_cfg=dict(type='Pretrained', checkpoint='DIR/own_box')``, the folder as for a bundled classifier).

With ``--segmentor TAG`` (a scenes checkpoint) more split its mIoU into finding and naming:

- **segmentor**: its own prediction (``tools/test.py``'s mIoU, recomputed here);
- **segmentor's names, exact finding**: the item pixels take the segmentor's best item class, the background is
  exact: its naming alone, to read against the classifiers';
- **segmentor's finding, true names**: the pixels it calls an item take their true class where they are one (and
  its class where they are background), the pixels it calls background stay background: its finding alone;
- **segmentor's finding, names of the P**: the same with the names of a classifier predictor ``P`` above in place of
  the true ones: what the segmentor would score if it named items as that classifier does.

Each is scored with ``tasks.seg.errors`` (the same confusion matrix as ``tools/test.py``'s mIoU, and the same
per-region majority vote by visible size), so its numbers read directly against a segmentor's breakdown.
"""
import argparse
import json
import os
import sys
from typing import NamedTuple

import numpy as np
from PIL import Image

from tasks.seg import errors

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _generator():
    tools = os.path.join(ROOT, "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import make_scenes
    return make_scenes


class Item(NamedTuple):
    """One pasted item of a replayed scene."""
    image: np.ndarray  # (28, 28) uint8: its Fashion-MNIST image
    cls: int  # its scenes class, 1..10
    visible: np.ndarray  # (size, size) bool: its pixels in the scene that no later item covers
    own: np.ndarray  # (28, 28) bool: the same pixels in the item's own frame
    box: np.ndarray  # (28, 28) uint8: its visible pixels at the scene's scale, cut out by their own square box


def _own_box(intensity, visible, pad=2):
    """``intensity`` (size, size) at the ``visible`` pixels only, cut out by the square around them (``pad`` pixels
    of margin, centred, zeros outside the canvas) and resized to 28x28: the fragment without where its item is."""
    if not visible.any():
        return np.zeros((28, 28), np.uint8)
    ys, xs = np.nonzero(visible)
    side = max(ys.max() - ys.min(), xs.max() - xs.min()) + 1 + 2 * pad
    top, left = (ys.min() + ys.max() + 1 - side) // 2, (xs.min() + xs.max() + 1 - side) // 2
    canvas = np.zeros((side, side), np.float32)
    src = np.where(visible, intensity, 0.0)
    y0, x0 = max(top, 0), max(left, 0)
    y1, x1 = min(top + side, src.shape[0]), min(left + side, src.shape[1])
    canvas[y0 - top:y1 - top, x0 - left:x1 - left] = src[y0:y1, x0:x1]
    return np.asarray(Image.fromarray(np.clip(np.rint(canvas), 0, 255).astype(np.uint8)).resize((28, 28),
                                                                                                Image.BILINEAR))


def replay(num, seed=0, split="validation", size=64, fmnist=None, **compose_kwargs):
    """The first ``num`` scenes of ``split`` as ``make_scenes`` wrote them, with what it pasted.

    Returns:
        ``(label maps, items)``: ``num`` (size, size) uint8 maps, and per scene its ``Item`` s in paint order.
    """
    gen = _generator()
    images, labels = gen.load_split(fmnist or gen.FMNIST, "t10k" if split == "validation" else "train")
    rng = gen.split_rng(seed, split)
    maps, scenes = [], []
    for _ in range(num):
        placed = []
        _, label = gen.compose(rng, images, labels, size=size, placed=placed, **compose_kwargs)
        owner = np.full((size, size), -1, np.int64)  # which item each pixel shows, as compose painted them
        for k, (_, y, x, item, mask) in enumerate(placed):
            owner[y:y + len(item), x:x + len(item)][mask] = k
        items = []
        for k, (i, y, x, item, _) in enumerate(placed):
            side = len(item)
            visible = owner == k
            own = Image.fromarray(visible[y:y + side, x:x + side].astype(np.uint8) * 255).resize((28, 28),
                                                                                                 Image.NEAREST)
            intensity = np.zeros((size, size), np.float32)
            intensity[y:y + side, x:x + side] = item
            items.append(Item(images[i], int(labels[i]) + 1, visible, np.asarray(own) > 0,
                              _own_box(intensity, visible)))
        maps.append(label)
        scenes.append(items)
    return maps, scenes


def replay_written(data_root, split="validation", seed=0, num=None):
    """The first ``num`` scenes of ``split`` under ``data_root`` (all by default; ADE20K layout), replayed.

    Returns:
        ``(image paths, label maps, items per scene)``. Refuses scenes that ``make_scenes.py --seed seed`` did not
        write (a replayed label map differs from the PNG), and more scenes than there are.
    """
    paths, gts = errors.read_split(data_root, split, num)
    maps, scenes = replay(len(gts), seed=seed, split=split, size=gts[0].shape[0])
    for p, gt, m in zip(paths, gts, maps):
        if not np.array_equal(gt, m):
            raise ValueError(f"the label map of {p} is not what make_scenes.py --seed {seed} writes: the replay "
                             f"needs the scenes of `make scenes` (its seed, size and item settings)")
    return paths, gts, scenes


def paint(scenes, names, size=64):
    """Label maps with each item's visible pixels set to its name (``names``: one class per item, in the order of
    ``scenes``' items), everything else background (0)."""
    out, n = [], 0
    for items in scenes:
        pred = np.zeros((size, size), np.int64)
        for it in items:
            pred[it.visible] = names[n]
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


# What a classifier is shown of an item (``Item`` -> (28, 28) uint8).
VIEWS = {
    "whole item": lambda it: it.image,
    "visible part in the item's frame": lambda it: it.image * it.own,
    "visible part in its own box": lambda it: it.box,
}


FRAGMENT_LR, FRAGMENT_BATCH = 5e-4, 128


def fragment_trained(model, view, seed=0, num_scenes=10000, epochs=5, lr=FRAGMENT_LR, batch=FRAGMENT_BATCH, size=64):
    """A copy of the classifier ``model`` trained for ``epochs`` more on ``VIEWS[view]`` of the items of the first
    ``num_scenes`` training scenes (``replay``; items wholly hidden left out), AdamW with a cosine decay to 0, no
    augmentation; deterministic for a seed and thread count."""
    import copy

    import torch
    import torch.nn.functional as F

    import zoo
    _, scenes = replay(num_scenes, seed=seed, split="training", size=size)
    shown = [it for items in scenes for it in items if it.visible.any()]
    x = zoo.preprocess(np.stack([VIEWS[view](it) for it in shown])[:, None], model)
    y = torch.tensor([it.cls - 1 for it in shown])
    net = copy.deepcopy(model).train()
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * -(-len(y) // batch))
    gen = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        for b in torch.randperm(len(y), generator=gen).split(batch):
            loss = F.cross_entropy(net(x[b]), y[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
    return net.eval()


# The folder of each fragment-trained classifier under ``--save-fragment-trained``.
FRAGMENT_FOLDERS = {"visible part in the item's frame": "item_frame", "visible part in its own box": "own_box"}


def _refuse_nonempty(folder):
    if os.path.isdir(folder) and os.listdir(folder):
        raise FileExistsError(f"{folder} is not empty; give --save-fragment-trained a new folder (nothing is "
                              f"overwritten)")


def save_fragment_trained(net, folder, classifier, view, top1, **trained):
    """Write the fragment-trained classifier ``net`` as a published folder (``zoo.save_pretrained``): its metric is
    ``top1`` (% of the visible validation items named right from view ``view``), and ``config.json``'s ``fragment``
    says what it was trained from and how (``trained``). Refuses a folder that already holds files."""
    from zoo import hub
    _refuse_nonempty(folder)
    spec = {k: net.pretrained_cfg[k] for k in ("mean", "std")}  # the classifier's normalisation, kept
    hub.save_pretrained(net, folder, dataset="fmnist", metrics={"visible_items_top1": round(top1, 2)}, input_spec=spec,
                        extra=dict(fragment=dict(trained_from=classifier, view=view, **trained)))


def analyse(classifier="sa_vit_micro.cls_fmnist", data_root="data/fashion_scenes", split="validation", seed=0,
            min_pixels=20, segmentor=None, fragment_epochs=0, fragment_scenes=10000, save_fragment_trained_to=None):
    """``{predictor: tasks.seg.errors.breakdown}`` for the predictors of the module docstring (the segmentor's
    only with ``segmentor``, a scenes tag or ``local-dir:`` folder; the fragment-trained classifiers only with
    ``fragment_epochs``, and written under ``save_fragment_trained_to`` when it is given)."""
    import zoo
    if save_fragment_trained_to is not None:
        if not fragment_epochs:
            raise ValueError("save_fragment_trained_to needs fragment_epochs > 0: nothing is trained without it")
        for sub in FRAGMENT_FOLDERS.values():  # refuse before the training, not after it
            _refuse_nonempty(os.path.join(save_fragment_trained_to, sub))
    paths, gts, scenes = replay_written(data_root, split, seed)
    size = gts[0].shape[0]
    items = [it for s in scenes for it in s]
    truth = np.array([it.cls for it in items])
    shown = np.array([it.visible.any() for it in items])  # items wholly hidden by later ones name no pixel

    def top1(named):  # % of the visible items named right
        return 100 * float((named == truth)[shown].mean())
    model = zoo.load(classifier).eval()
    names = {"true class": truth}
    for view, show in VIEWS.items():
        names[f"classifier, {view}"] = classify(model, [show(it) for it in items])
    if fragment_epochs:
        for view in list(VIEWS)[1:]:
            tuned = fragment_trained(model, view, seed=seed, num_scenes=fragment_scenes, epochs=fragment_epochs,
                                     size=size)
            named = names[f"fragment-trained classifier, {view}"] = classify(tuned, [VIEWS[view](it) for it in items])
            if save_fragment_trained_to is not None:
                save_fragment_trained(tuned, os.path.join(save_fragment_trained_to, FRAGMENT_FOLDERS[view]),
                                      classifier, view, top1(named), seed=seed,
                                      epochs=fragment_epochs, num_scenes=fragment_scenes, lr=FRAGMENT_LR,
                                      batch=FRAGMENT_BATCH)
    preds = {key: paint(scenes, named, size=size) for key, named in names.items()}
    item_names = {}  # the per-region vote counts item classes only (errors.item_votes)
    if segmentor is not None:
        labels, best_item = errors.predict(zoo.load(segmentor).eval(), paths)
        preds["segmentor"] = labels
        preds["segmentor's names, exact finding"] = [np.where(gt > 0, b, 0) for gt, b in zip(gts, best_item)]
        item_names = {"segmentor": best_item, "segmentor's names, exact finding": best_item}
        named_by = [("true names", "true class")] + [(f"names of the {k}", k) for k in names
                                                     if "classifier" in k and "whole" not in k]
        for name, key in named_by:
            preds[f"segmentor's finding, {name}"] = [np.where(lab > 0, np.where(gt > 0, n, lab), 0)
                                                     for gt, lab, n in zip(gts, labels, preds[key])]
            item_names[f"segmentor's finding, {name}"] = preds[key]
    out = {}
    for key, pred in preds.items():
        conf = errors.confusion(gts, pred, 11)
        votes = errors.item_votes(gts, item_names.get(key, pred), 11, min_pixels=min_pixels)
        out[key] = errors.breakdown(conf, votes)
        if key in names:
            out[key].update(visible_items=int(shown.sum()), visible_items_top1=top1(names[key]))
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
    p.add_argument("--fragment-epochs", type=int, default=0,
                   help="also train a copy of the classifier this many epochs on the training items' visible parts")
    p.add_argument("--fragment-scenes", type=int, default=10000, help="training scenes whose items it learns from")
    p.add_argument("--save-fragment-trained", metavar="DIR",
                   help="write the fragment-trained classifiers as published folders DIR/item_frame, DIR/own_box")
    a = p.parse_args()
    if a.save_fragment_trained and not a.fragment_epochs:
        p.error("--save-fragment-trained needs --fragment-epochs N (N > 0): nothing is trained without it")
    res = analyse(a.classifier, a.data, a.split, a.seed, a.min_pixels, a.segmentor, a.fragment_epochs,
                  a.fragment_scenes, a.save_fragment_trained)
    print(json.dumps(errors.rounded(dict(classifier=a.classifier, **res)), indent=1))
