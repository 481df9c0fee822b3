"""Can a scenes segmentor's features name an item better than its logits do, once told the item's exact pixels?

``python -m tasks.seg.region_probe TAG [--train-scenes 2000]`` replays the scenes
(``tasks.seg.oracle.replay_written``: every item's visible pixels), runs ``zoo.load(TAG)`` on them, and averages four
of its maps over each item's visible pixels (items of at least ``--min-pixels``), each map resized bilinearly to the
scene's size first:

- ``trunk``: the trunk's last block (the backbone's last output);
- ``trunk_all``: all the blocks the backbone hands to the neck, concatenated;
- ``head``: the decode head's features just before its 1x1 classifier (``_forward_feature``);
- ``logits``: the segmentor's logits.

Then it reads them two ways:

- ``segmentor_vote``: the item class with the highest mean logit (no training): the segmentor's own name for the
  item when it is told the item's outline;
- ``linear_<map>``: a multinomial logistic regression (standardised features, L-BFGS, a small weight decay) trained
  on the items of the first ``--train-scenes`` training scenes and scored on the validation items.

If a linear read-out of the head's features names the items no better than the segmentor's vote, the naming
errors are in the features, not in how the logits are read out per pixel or in finding the outline. Scores are the
percentage of items named right, overall and by visible size (the bins of ``tasks.seg.errors``), for the training
items (fit) and the validation items.
"""
import argparse
import json

import numpy as np

from tasks.seg.errors import SIZE_BINS, rounded, size_bin_name
from tasks.seg.oracle import replay_written

MAPS = ("trunk", "trunk_all", "head", "logits")


def pooled(model, paths, scenes, size=64, min_pixels=20, batch=50):
    """Each map of ``MAPS`` averaged over every item's visible pixels.

    Returns:
        ``(features, classes, pixels)``: ``{map: (R, D) tensor}``, the items' classes (R,) and visible sizes (R,),
        R the items of ``scenes`` with at least ``min_pixels`` visible pixels, in scene and paint order.
    """
    import torch
    import torch.nn.functional as F
    from PIL import Image

    import zoo
    feats, classes, pixels = {k: [] for k in MAPS}, [], []
    for i in range(0, len(paths), batch):
        x = zoo.preprocess([Image.open(p) for p in paths[i:i + batch]], model)
        with torch.no_grad():
            levels = model.backbone(x)
            head = model.decode_head._forward_feature(model.neck(levels))
            maps = dict(trunk=levels[-1], trunk_all=torch.cat(levels, 1), head=head,
                        logits=model.decode_head.cls_seg(head))
            maps = {k: F.interpolate(v, size=size, mode="bilinear", align_corners=False) for k, v in maps.items()}
        for j, items in enumerate(scenes[i:i + batch]):
            for it in items:
                n = int(it.visible.sum())
                if n < min_pixels:
                    continue
                w = torch.from_numpy(it.visible).to(x.dtype)
                for k, m in maps.items():
                    feats[k].append(torch.einsum("chw,hw->c", m[j], w) / n)
                classes.append(it.cls)
                pixels.append(n)
    return {k: torch.stack(v) for k, v in feats.items()}, np.array(classes), np.array(pixels)


def linear_probe(x_train, y_train, x_eval, num_classes, weight_decay=1e-4, max_iter=1000, seed=0):
    """A multinomial logistic regression on standardised features (L-BFGS, full batch).

    Returns:
        ``(train predictions, eval predictions)`` as numpy arrays of class indices.
    """
    import torch
    import torch.nn.functional as F
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    a, b = (x_train - mean) / std, (x_eval - mean) / std
    y = torch.as_tensor(y_train, dtype=torch.long)
    torch.manual_seed(seed)
    lin = torch.nn.Linear(a.shape[1], num_classes)
    opt = torch.optim.LBFGS(lin.parameters(), max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(lin(a), y) + weight_decay * lin.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return lin(a).argmax(1).numpy(), lin(b).argmax(1).numpy()


def by_size(right, pixels):
    """Percent of ``right`` (0/1 per item) overall and per visible-size bin of ``tasks.seg.errors``."""
    out = dict(all=100 * float(np.mean(right)))
    for lo, hi in SIZE_BINS:
        sel = (pixels >= lo) & (pixels < hi if hi else True)
        out[size_bin_name(lo, hi)] = 100 * float(np.mean(right[sel])) if sel.any() else float("nan")
    return out


def load(tag, trunk_from=None):
    """``zoo.load(tag)`` in eval mode; with ``trunk_from`` (a classifier tag or folder) its trunk replaced by that
    classifier's, loaded as a seg config's ``init_cfg`` loads it (then only the trunk's read-outs describe a trained
    network: the head was trained on another trunk)."""
    import zoo
    model = zoo.load(tag).eval()
    if trunk_from:
        model.backbone.load_classification_checkpoint(trunk_from)
    return model


def analyse(tag, data_root="data/fashion_scenes", train_scenes=2000, seed=0, min_pixels=20, trunk_from=None):
    """The module docstring's numbers for ``load(tag, trunk_from)``."""
    model = load(tag, trunk_from)
    num_classes = model.pretrained_cfg["num_classes"]
    paths, gts, scenes = replay_written(data_root, "training", seed, num=train_scenes)
    ftr, ytr, ptr = pooled(model, paths, scenes, gts[0].shape[0], min_pixels)
    paths, gts, scenes = replay_written(data_root, "validation", seed)
    fva, yva, pva = pooled(model, paths, scenes, gts[0].shape[0], min_pixels)
    out = dict(train_items=len(ytr), val_items=len(yva))
    out["segmentor_vote"] = dict(fit=by_size(ftr["logits"][:, 1:].argmax(1).numpy() + 1 == ytr, ptr),
                                 val=by_size(fva["logits"][:, 1:].argmax(1).numpy() + 1 == yva, pva))
    for k in MAPS:
        fit, pred = linear_probe(ftr[k], ytr, fva[k], num_classes, seed=seed)
        out[f"linear_{k}"] = dict(fit=by_size(fit == ytr, ptr), val=by_size(pred == yva, pva))
    return out


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("weights", help="a seg tag or local-dir: folder, e.g. sa_vit_micro.seg_scenes")
    p.add_argument("--data", default="data/fashion_scenes")
    p.add_argument("--train-scenes", type=int, default=2000, help="training scenes whose items train the probes")
    p.add_argument("--seed", type=int, default=0, help="the scenes' generator seed (make scenes: 0)")
    p.add_argument("--min-pixels", type=int, default=20)
    p.add_argument("--trunk-from", metavar="CLASSIFIER",
                   help="replace the segmentor's trunk by this classifier's (e.g. the cls_fmnist checkpoint it started "
                        "from), to read the trunk before segmentation training")
    a = p.parse_args()
    res = analyse(a.weights, a.data, a.train_scenes, a.seed, a.min_pixels, trunk_from=a.trunk_from)
    print(json.dumps(rounded(dict(weights=a.weights, trunk_from=a.trunk_from, train_scenes=a.train_scenes, **res)),
                     indent=1))
