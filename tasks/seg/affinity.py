"""Items named as a whole: pixel affinities learnt on a frozen scenes segmentor, and a random walk over them.

``python -m tasks.seg.region_naming`` showed that a vote of the segmentor's own class probabilities over each item's
exact region lifts its mIoU by about 8 points (51.3 -> 59.0 for ``sa``), and that the regions cannot be taken from
its label map. This probe learns where the regions are instead. As in AffinityNet (Ahn and Kwak, "Learning
Pixel-level Semantic Affinity with Image-level Supervision", CVPR 2018), a small head predicts for every pixel
whether its right and lower neighbours carry the same class (``AffinityHead``; the targets come from the semantic
label map alone, ``affinity_targets``), and at test time the segmentor's class probabilities are spread along those
affinities by a random walk (``random_walk``): each step replaces a pixel's probabilities by the average of its own
and its 4 neighbours', each neighbour weighted by ``affinity ** beta``, over the pixels the segmentor calls an item
only. The labels are the argmax of the walked probabilities over the item classes; background stays where the
segmentor put it, so the finding (item versus background) is unchanged and only the naming moves.

The head reads the normalised image and the segmentor's decode-head features (before its classifier, upsampled to
the image), 2 conv layers of ``channels`` at full resolution; the segmentor stays frozen (``train``). ``beta`` and
the number of steps are chosen on scenes that neither network trained on (``--tune-data``, by default scenes
40,000-40,499 of ``make scenes80k``, whose first 40,000 are the bundled segmentors' training scenes), then the walk
with them is scored once on the validation scenes::

    python -m tasks.seg.affinity sa_vit_micro.seg_scenes --out work_dirs/affinity/sa
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tasks.seg import errors

BETAS = (8, 16, 32, 64)
STEPS = (100, 200, 400, 800)


class AffinityHead(nn.Module):
    """(B, 2, H, W) logits that a pixel and its right (channel 0) / lower (channel 1) neighbour share a class, from
    the image (B, 3, H, W) and features (B, C, h, w) (resized to H x W)."""

    def __init__(self, in_channels, channels=32, image_channels=3):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(image_channels + in_channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(True),
            nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(True),
            nn.Conv2d(channels, 2, 1))

    def forward(self, image, feats):
        feats = F.interpolate(feats, size=image.shape[-2:], mode="bilinear", align_corners=False)
        return self.net(torch.cat([image, feats], 1))


def affinity_targets(labels, ignore_index=255):
    """``(right, down, right_valid, down_valid)`` for (B, H, W) integer ``labels``: whether each pixel and its right
    ((B, H, W-1)) / lower ((B, H-1, W)) neighbour carry the same label, and whether both are labelled at all."""
    ok = labels != ignore_index
    right, down = labels[:, :, :-1] == labels[:, :, 1:], labels[:, :-1] == labels[:, 1:]
    return right.float(), down.float(), ok[:, :, :-1] & ok[:, :, 1:], ok[:, :-1] & ok[:, 1:]


def affinity_loss(logits, labels, ignore_index=255):
    """Mean binary cross-entropy of the (B, 2, H, W) affinity ``logits`` over the labelled neighbour pairs."""
    right, down, rv, dv = affinity_targets(labels, ignore_index)
    lr = F.binary_cross_entropy_with_logits(logits[:, 0, :, :-1], right, reduction="none")[rv]
    ld = F.binary_cross_entropy_with_logits(logits[:, 1, :-1], down, reduction="none")[dv]
    return torch.cat([lr, ld]).mean()


def random_walk(probs, affinity, mask, beta, steps):
    """Spread (B, K, H, W) ``probs`` along the (B, 2, H, W) ``affinity`` (probabilities, as ``AffinityHead``'s
    sigmoid) for ``steps`` steps within the (B, H, W) bool ``mask``: each step sets every pixel to the weighted mean of
    itself (weight 1) and its 4 neighbours inside the mask (weight ``affinity ** beta`` of the pair). Pixels outside the
    mask keep their values and pass nothing on."""
    m = mask.to(probs.dtype)
    a = affinity.clamp(0, 1) ** beta
    wr = a[:, 0, :, :-1] * m[:, :, :-1] * m[:, :, 1:]  # (B, H, W-1): pixel (y, x) with (y, x+1)
    wd = a[:, 1, :-1] * m[:, :-1] * m[:, 1:]  # (B, H-1, W): pixel (y, x) with (y+1, x)
    den = torch.ones_like(m)
    den[:, :, :-1] += wr
    den[:, :, 1:] += wr
    den[:, :-1] += wd
    den[:, 1:] += wd
    wr, wd, inv = wr[:, None], wd[:, None], den.reciprocal()[:, None]
    x = probs.clone()
    for _ in range(steps):
        nxt = x.clone()
        nxt[..., :-1] += wr * x[..., 1:]
        nxt[..., 1:] += wr * x[..., :-1]
        nxt[..., :-1, :] += wd * x[..., 1:, :]
        nxt[..., 1:, :] += wd * x[..., :-1, :]
        x = nxt.mul_(inv)
    return x


def walked_labels(probs, affinity, beta, steps, background=0):
    """Label maps (B, H, W): the segmentor's background where its argmax is background, elsewhere the best item class
    of ``random_walk`` over the pixels it calls an item."""
    labels = probs.argmax(1)
    mask = labels != background
    walked = random_walk(probs, affinity, mask, beta, steps)
    walked[:, background] = -1  # an item pixel takes an item class
    return torch.where(mask, walked.argmax(1), labels)


class _Frozen:
    """The frozen segmentor: (class probabilities at the image size, decode-head features) for normalised images."""

    def __init__(self, segmentor):
        self.model = segmentor.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self._feats = None
        self.model.decode_head.conv_seg.register_forward_hook(lambda mod, inp, out: setattr(self, "_feats", inp[0]))
        self.channels = self.model.decode_head.conv_seg.in_channels

    def __call__(self, x):
        with torch.no_grad():
            probs = self.model(x).float().softmax(1)
        return probs, self._feats


def _load(data_root, split, model, first=0, num=None):
    from PIL import Image

    import zoo
    paths, gts = errors.read_split(data_root, split, None if num is None else first + num)
    paths, gts = paths[first:], gts[first:]
    x = []
    for i in range(0, len(paths), 1000):  # in chunks, each image read and closed
        chunk = []
        for p in paths[i:i + 1000]:
            with Image.open(p) as im:
                chunk.append(im.convert("RGB"))
        x.append(zoo.preprocess(chunk, model))
    return torch.cat(x), torch.from_numpy(np.stack(gts).astype(np.int64))


def train(frozen, x, y, iters=3000, batch=16, lr=2e-3, channels=32, seed=0, log=None):
    """An ``AffinityHead`` trained ``iters`` steps on (x, y) (normalised images, label maps) with the segmentor
    ``frozen``: AdamW, one-cycle schedule, random horizontal flips; deterministic for a seed and thread count."""
    torch.manual_seed(seed)
    head = AffinityHead(frozen.channels, channels)
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=iters)
    gen = torch.Generator().manual_seed(seed)
    t0 = time.time()
    for it in range(iters):
        b = torch.randint(len(x), (batch,), generator=gen)
        xb, yb = x[b], y[b]
        flip = torch.rand(batch, generator=gen) < 0.5
        xb[flip], yb[flip] = xb[flip].flip(-1), yb[flip].flip(-1)
        _, feats = frozen(xb)
        loss = affinity_loss(head(xb, feats), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if log is not None and (it + 1) % 500 == 0:
            log.append(dict(iter=it + 1, loss=float(loss.detach()), seconds=round(time.time() - t0, 1)))
    return head.eval()


def predict(frozen, head, x, batch=50):
    """(class probabilities (N, K, H, W), affinities (N, 2, H, W)) of the images ``x``."""
    probs, affs = [], []
    with torch.no_grad():
        for i in range(0, len(x), batch):
            p, feats = frozen(x[i:i + batch])
            probs.append(p)
            affs.append(head(x[i:i + batch], feats).sigmoid())
    return torch.cat(probs), torch.cat(affs)


def score(gts, labels, num_classes=11):
    """``tasks.seg.errors.breakdown`` of label maps against ``gts`` (both (N, H, W))."""
    gts, labels = list(np.asarray(gts)), list(np.asarray(labels))
    return errors.breakdown(errors.confusion(gts, labels, num_classes), errors.item_votes(gts, labels, num_classes))


def sweep(probs, affs, gts, betas=BETAS, steps=STEPS, batch=100):
    """``{(beta, steps): mIoU}`` of the walk on one set of scenes; each beta walks once to its largest step count,
    scored at every count of ``steps`` on the way."""
    out = {}
    for beta in betas:
        done, parts = 0, [probs[i:i + batch].clone() for i in range(0, len(probs), batch)]
        for s in sorted(steps):
            labels = []
            for k, i in enumerate(range(0, len(probs), batch)):
                p, a = probs[i:i + batch], affs[i:i + batch]
                mask = p.argmax(1) != 0
                parts[k] = random_walk(parts[k], a, mask, beta, s - done)
                walked = parts[k].clone()
                walked[:, 0] = -1
                labels.append(torch.where(mask, walked.argmax(1), p.argmax(1)))
            done = s
            out[(beta, s)] = score(gts, torch.cat(labels).numpy())["mIoU"]
    return out


def analyse(segmentor, out_dir, data_root="data/fashion_scenes", train_root="data/fashion_scenes40k",
            train_scenes=10000, tune_root="data/fashion_scenes80k", tune_first=40000, tune_scenes=500, iters=3000,
            seed=0, betas=BETAS, steps=STEPS):
    """Train the head on ``segmentor`` (a scenes tag or folder), choose beta and steps on the tuning scenes, score
    the validation scenes; writes ``out_dir/affinity_head.pt`` and returns the record."""
    import zoo
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        raise FileExistsError(f"{out_dir} is not empty; give a new --out folder (nothing is overwritten)")
    seg = zoo.load(segmentor)
    frozen = _Frozen(seg)
    x, y = _load(train_root, "training", seg, 0, train_scenes)
    log = []
    head = train(frozen, x, y, iters=iters, seed=seed, log=log)
    del x, y
    os.makedirs(out_dir, exist_ok=True)
    torch.save(head.state_dict(), os.path.join(out_dir, "affinity_head.pt"))  # before the scoring, which is long
    xt, yt = _load(tune_root, "training", seg, tune_first, tune_scenes)
    pt, at = predict(frozen, head, xt)
    tuning = sweep(pt, at, yt.numpy(), betas, steps)
    beta, n = max(tuning, key=tuning.get)
    xv, yv = _load(data_root, "validation", seg)
    pv, av = predict(frozen, head, xv)
    right, down, rv, dv = affinity_targets(yv)
    both_items = ((yv[:, :, :-1] > 0) & (yv[:, :, 1:] > 0), (yv[:, :-1] > 0) & (yv[:, 1:] > 0))
    hits = ((av[:, 0, :, :-1] > 0.5).float() == right, (av[:, 1, :-1] > 0.5).float() == down)
    record = dict(
        segmentor=segmentor, iters=iters, seed=seed, train=dict(root=train_root, scenes=train_scenes), curve=log,
        tuning=dict(root=tune_root, first=tune_first, scenes=tune_scenes,
                    mIoU={f"beta {b}, {s} steps": v for (b, s), v in tuning.items()},
                    segmentor_mIoU=score(yt.numpy(), pt.argmax(1).numpy())["mIoU"]),
        chosen=dict(beta=beta, steps=n),
        validation=dict(segmentor=score(yv.numpy(), pv.argmax(1).numpy()),
                        walked=score(yv.numpy(), walked_labels(pv, av, beta, n).numpy()),
                        affinity_accuracy=100 * float(torch.cat([hits[0][rv], hits[1][dv]]).float().mean()),
                        affinity_accuracy_item_pairs=100 * float(torch.cat([hits[0][both_items[0]],
                                                                            hits[1][both_items[1]]]).float().mean())))
    with open(os.path.join(out_dir, "record.json"), "w") as f:
        json.dump(errors.rounded(record), f, indent=1)
    return record


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("segmentor", help="a scenes tag or local-dir: folder, e.g. sa_vit_micro.seg_scenes")
    p.add_argument("--out", required=True, help="a new folder for the head's weights and the record")
    p.add_argument("--data", default="data/fashion_scenes", help="the validation scenes")
    p.add_argument("--train-data", default="data/fashion_scenes40k")
    p.add_argument("--train-scenes", type=int, default=10000)
    p.add_argument("--tune-data", default="data/fashion_scenes80k")
    p.add_argument("--tune-first", type=int, default=40000, help="the first tuning scene (the ones before it may "
                                                                 "have been trained on)")
    p.add_argument("--tune-scenes", type=int, default=500)
    p.add_argument("--iters", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    rec = analyse(a.segmentor, a.out, a.data, a.train_data, a.train_scenes, a.tune_data, a.tune_first,
                  a.tune_scenes, a.iters, a.seed)
    print(json.dumps(errors.rounded(dict(chosen=rec["chosen"], tuning=rec["tuning"],
                                         validation={k: (v["mIoU"] if isinstance(v, dict) else v)
                                                     for k, v in rec["validation"].items()})), indent=1))
