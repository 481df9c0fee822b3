"""Where a scenes segmentor's errors come from: finding the items, or naming them.

``python -m tasks.seg.errors TAG [--data data/fashion_scenes] [--split validation]`` runs ``zoo.load(TAG)`` on every
image of the split (as ``tools/test.py`` does: RGB, the model's mean/std, whole image) and splits its mistakes:

- **Finding**: item versus background, one binary IoU over all pixels (``fg_iou``).
- **Naming**: of the item pixels, the share labelled background, the right item class and another item class.
- **Per item**: each connected region of one ground-truth item class (an item as far as it is visible; at least
  ``min_pixels``) takes the majority of the item classes predicted over it; the share of regions whose majority is
  right, overall and by visible size. This is the item-level recognition rate, comparable with a classifier's top-1.
  A region named wrong is split further: named as an item it touches (a ground-truth item class among the pixels
  8-connected to it: the occluder, or the item it hides), or as something else; next to it, the share a wrong name
  drawn at random from the other item classes would give (``..._by_chance``), the baseline that share is read against.

mIoU is recomputed from the same confusion matrix, so the breakdown adds up to what the card reports.
"""
import argparse
import glob
import json
import os

import numpy as np

SIZE_BINS = ((0, 150), (150, 400), (400, None))  # visible pixels of an item region: [lo, hi)


def size_bin_name(lo, hi):
    """A ``SIZE_BINS`` bin as the reports name it: ``<150``, ``150-400``, ``>=400``."""
    return f"<{hi}" if not lo else f"{lo}-{hi}" if hi else f">={lo}"


def confusion(gts, preds, num_classes):
    """(K, K) pixel counts, rows the ground truth, columns the prediction; labels outside 0..K-1 are ignored."""
    out = np.zeros((num_classes, num_classes), np.int64)
    for gt, pred in zip(gts, preds):
        gt, pred = np.asarray(gt, np.int64).ravel(), np.asarray(pred, np.int64).ravel()
        keep = (gt >= 0) & (gt < num_classes)
        out += np.bincount(gt[keep] * num_classes + pred[keep], minlength=num_classes ** 2).reshape(out.shape)
    return out


def item_votes(gts, item_preds, num_classes, background=0, min_pixels=20):
    """``[(visible pixels, majority right, majority is a touching item's class, that by chance)]`` for every
    connected region of one item class in ``gts``.

    ``item_preds`` is the best item class per pixel (background excluded), so a region's majority is over the
    item classes only; ties go to the lowest class index. The third value is 1 when the majority is wrong and is
    the ground-truth class of an item pixel 8-connected to the region (an item it touches); the fourth is its
    probability had a wrong majority been any other item class with equal chance (touching classes / other classes).
    """
    from scipy import ndimage
    ring = np.ones((3, 3), bool)
    out = []
    for gt, pred in zip(gts, item_preds):
        gt, pred = np.asarray(gt, np.int64), np.asarray(pred, np.int64)
        for c in range(num_classes):
            if c == background:
                continue
            regions, n = ndimage.label(gt == c)  # 4-connected
            for j in range(1, n + 1):
                mask = regions == j
                size = int(mask.sum())
                if size < min_pixels:
                    continue
                named = int(np.bincount(pred[mask], minlength=num_classes).argmax())
                touching = gt[ndimage.binary_dilation(mask, ring) & ~mask]
                others = set(np.unique(touching).tolist()) - {background, c}
                out.append((size, int(named == c), int(named != c and named in others),
                            (named != c) * len(others) / (num_classes - 2)))  # other item classes: K - background - c
    return out


def breakdown(conf, votes, background=0):
    """The numbers of the module docstring (percent) from ``confusion`` and ``item_votes``."""
    conf = np.asarray(conf, np.float64)
    inter = np.diag(conf)
    union = conf.sum(0) + conf.sum(1) - inter
    items = [k for k in range(len(conf)) if k != background]
    rows = conf[items]
    item_px = rows.sum()
    right = sum(conf[k, k] for k in items)
    fg_inter = conf[np.ix_(items, items)].sum()
    fg_union = item_px + conf[background, items].sum()
    out = dict(
        mIoU=100 * float(np.mean(inter / union)),
        iou=[100 * float(v) for v in inter / union],
        fg_iou=100 * float(fg_inter / fg_union),
        item_pixels_as_background=100 * float(rows[:, background].sum() / item_px),
        item_pixels_right=100 * float(right / item_px),
        item_pixels_as_other_item=100 * float((fg_inter - right) / item_px),
        items=len(votes),
        items_majority_right=_share([v[1] for v in votes]),
        items_named_as_touching_item=_share([v[2] for v in votes]),
        items_named_as_touching_item_by_chance=_share([v[3] for v in votes]),
        by_size={})
    for lo, hi in SIZE_BINS:
        sel = [v for v in votes if v[0] >= lo and (hi is None or v[0] < hi)]
        out["by_size"][size_bin_name(lo, hi)] = dict(
            items=len(sel), majority_right=_share([v[1] for v in sel]),
            named_as_touching_item=_share([v[2] for v in sel]),
            named_as_touching_item_by_chance=_share([v[3] for v in sel]))
    return out


def _share(flags):
    """Mean of ``flags`` (0/1 or probabilities) in percent (NaN for none)."""
    return 100 * float(np.mean(flags)) if flags else float("nan")


def predict(model, paths, batch=50):
    """(label map, best item class) per image of ``paths``, as ``tools/test.py`` scores them (whole image)."""
    import torch
    from PIL import Image

    import zoo
    labels, items = [], []
    for i in range(0, len(paths), batch):
        x = zoo.preprocess([Image.open(p) for p in paths[i:i + batch]], model)
        with torch.no_grad():
            logits = model(x)
        labels += list(logits.argmax(1).numpy())
        items += list(logits[:, 1:].argmax(1).numpy() + 1)
    return labels, items


def read_split(data_root, split, num=None, first=0):
    """``(image paths, label maps)`` of ``split`` in the ADE20K layout (images ``*.jpg``, labels ``*.png``), in name
    order from the ``first``: all of them, or ``num`` (only their label maps are read)."""
    from PIL import Image
    paths = sorted(glob.glob(os.path.join(data_root, "images", split, "*.jpg")))
    if not paths:
        raise FileNotFoundError(f"no images in {os.path.join(data_root, 'images', split)}; make scenes writes them")
    if num is not None and first + num > len(paths):
        raise ValueError(f"{split} has {len(paths)} scenes under {data_root}, fewer than the {first + num} asked for "
                         f"(scenes {first}-{first + num - 1})")
    paths = paths[first:None if num is None else first + num]
    gts = []
    for p in paths:
        with Image.open(p.replace(os.sep + "images" + os.sep, os.sep + "annotations" + os.sep)[:-len(".jpg")]
                        + ".png") as im:
            gts.append(np.asarray(im))
    return paths, gts


def analyse(tag, data_root="data/fashion_scenes", split="validation", min_pixels=20):
    """``breakdown`` of ``zoo.load(tag)`` on ``split`` (images ``*.jpg``, labels ``*.png``, the ADE20K layout)."""
    import zoo
    model = zoo.load(tag).eval()
    num_classes = model.pretrained_cfg["num_classes"]
    paths, gts = read_split(data_root, split)
    labels, items = predict(model, paths)
    return breakdown(confusion(gts, labels, num_classes), item_votes(gts, items, num_classes, min_pixels=min_pixels))


def rounded(obj, digits=2):
    """``obj`` with its floats rounded for printing (NaN, an empty size bin, as None)."""
    if isinstance(obj, float):
        return None if obj != obj else round(obj, digits)
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v, digits) for v in obj]
    return obj


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("weights", help="a seg tag or local-dir: folder, e.g. sa_vit_micro.seg_scenes")
    p.add_argument("--data", default="data/fashion_scenes")
    p.add_argument("--split", default="validation")
    p.add_argument("--min-pixels", type=int, default=20)
    a = p.parse_args()
    res = analyse(a.weights, a.data, a.split, a.min_pixels)
    print(json.dumps(rounded(dict(weights=a.weights, **res)), indent=1))
