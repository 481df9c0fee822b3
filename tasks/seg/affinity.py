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

Head, targets, loss and walk live in ``zoo.layers.affinity``; ``ZooEncoderDecoder(refine=...)`` runs head and walk
at inference. ``--save-refined FOLDER`` writes the segmentor with the trained head and the chosen walk as a published
folder (``refined_model``, ``save_refined``), which ``tools/make_weights.py --refine`` publishes for the bundled tags.
The sweep here walks step by step; the refined segmentor evaluates the same walk as a Chebyshev series.
"""
import argparse
import json
import os
import time

import numpy as np
import torch

from tasks.seg import errors
from zoo.layers.affinity import (NEIGHBOURS, AffinityHead, affinity_loss, affinity_targets, name_items,  # noqa: F401
                                 offsets_within, pair_views, random_walk, walked_labels)

BETAS = (8, 16, 32, 64)
STEPS = (100, 200, 400, 800)
THRESHOLDS = (0.5, 0.9, 0.97, 0.99)
STATE_FILE = "train_state.pt"  # the head's training state in the output folder while it trains (``train``)


def affinity_regions(affinity, mask, threshold=0.5, offsets=NEIGHBOURS):
    """(B, H, W) int64 region ids (-1 outside ``mask``): the connected components of the ``mask`` pixels when two
    of them are joined where their (B, O, H, W) ``affinity`` (one channel per offset) exceeds ``threshold``. One graph
    for the whole batch, so region ids are unique across it."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    b, h, w = mask.shape
    idx = np.arange(b * h * w).reshape(b, h, w)
    m = mask.numpy()
    a = affinity.numpy() > threshold
    src, dst = [], []
    for k, o in enumerate(offsets):
        (ma, mb), (ia, ib) = pair_views(m, o), pair_views(idx, o)
        join = pair_views(a[:, k], o)[0] & ma & mb
        src.append(ia[join])
        dst.append(ib[join])
    src, dst = np.concatenate(src), np.concatenate(dst)
    graph = coo_matrix((np.ones(len(src), np.int8), (src, dst)), shape=(idx.size, idx.size))
    _, comp = connected_components(graph, directed=False)
    return torch.from_numpy(np.where(m, comp.reshape(b, h, w), -1))


def region_labels(probs, affinity, threshold=0.5, background=0, offsets=NEIGHBOURS):
    """Label maps (B, H, W): the segmentor's background where its argmax is background; each of its item pixels
    takes the item class with the largest summed probability over its ``affinity_regions``."""
    labels = probs.argmax(1)
    mask = labels != background
    regions = affinity_regions(affinity, mask, threshold, offsets)
    k = probs.shape[1]
    inside = regions[mask]
    votes = torch.zeros(int(inside.max()) + 1 if inside.numel() else 0, k, dtype=probs.dtype)
    votes.index_add_(0, inside, probs.permute(0, 2, 3, 1)[mask])
    votes[:, background] = -1
    out = labels.clone()
    out[mask] = votes.argmax(1)[inside]
    return out


class _Frozen:
    """The frozen segmentor: (class probabilities at the image size, decode-head features) for normalised images."""

    def __init__(self, segmentor):
        self.model = segmentor.eval()
        self.model.use_refine = False  # a refined segmentor's own logits, before its walk
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
    paths, gts = errors.read_split(data_root, split, num, first)
    x = []
    for i in range(0, len(paths), 1000):  # in chunks, each image read and closed
        chunk = []
        for p in paths[i:i + 1000]:
            with Image.open(p) as im:
                chunk.append(im.convert("RGB"))
        x.append(zoo.preprocess(chunk, model))
    return torch.cat(x), torch.from_numpy(np.stack(gts).astype(np.int64))


def _fingerprint(frozen, x, y):
    """What a resumed head training must find unchanged, as sha256 digests of the raw bytes: the frozen segmentor's
    state (weights and buffers), the training labels and 256 of the images spread over them."""
    import hashlib

    def digest(tensors):
        h = hashlib.sha256()
        for t in tensors:
            h.update(t.detach().contiguous().numpy().tobytes())
        return h.hexdigest()
    every = max(1, len(x) // 256)
    return dict(segmentor=digest(frozen.model.state_dict().values()), scenes=len(x), images=digest([x[::every]]),
                labels=digest([y]))


def train(frozen, x, y, iters=3000, batch=16, lr=2e-3, channels=32, seed=0, log=None, offsets=NEIGHBOURS,
          state_path=None, save_every=500):
    """An ``AffinityHead`` trained ``iters`` steps on (x, y) (normalised images, label maps) with the segmentor
    ``frozen``: AdamW, one-cycle schedule, random horizontal flips; deterministic for a seed and thread count.

    With ``state_path``, the training state (head, optimiser, schedule, the sampling generator, the log, the step) is
    written there every ``save_every`` steps and at the end, and a training that finds one there goes on from it
    (from the end: no step at all): the head it ends with is the one an uninterrupted run makes, bit for bit. A state
    from other settings, another thread count, another segmentor or other data is refused. The caller removes the
    file when it no longer needs it (``analyse`` does once its record is written)."""
    if save_every < 1:
        raise ValueError(f"save_every must be a positive number of steps, got {save_every}")
    torch.manual_seed(seed)
    head = AffinityHead(frozen.channels, channels, offsets=offsets)
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=iters)
    gen = torch.Generator().manual_seed(seed)
    log = [] if log is None else log
    start, elapsed, setting = 0, 0.0, None
    if state_path is not None:
        setting = dict(iters=iters, batch=batch, lr=lr, channels=channels, seed=seed, threads=torch.get_num_threads(),
                       offsets=[list(o) for o in offsets], **_fingerprint(frozen, x, y))
        if os.path.isfile(state_path):
            state = torch.load(state_path, map_location="cpu", weights_only=True)
            if state["setting"] != setting:
                differ = sorted(k for k in setting if state["setting"].get(k) != setting[k])
                raise ValueError(f"{state_path} is the state of another training (it differs in {', '.join(differ)}); "
                                 f"give a new folder, or the settings it was made with")
            head.load_state_dict(state["head"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["schedule"])
            gen.set_state(state["generator"])
            start, elapsed = state["step"], state["seconds"]
            log[:] = state["log"]
    t0 = time.time() - elapsed
    for it in range(start, iters):
        b = torch.randint(len(x), (batch,), generator=gen)
        xb, yb = x[b], y[b]
        flip = torch.rand(batch, generator=gen) < 0.5
        xb[flip], yb[flip] = xb[flip].flip(-1), yb[flip].flip(-1)
        _, feats = frozen(xb)
        loss = affinity_loss(head(xb, feats), yb, offsets=offsets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if (it + 1) % 500 == 0:
            log.append(dict(iter=it + 1, loss=float(loss.detach()), seconds=round(time.time() - t0, 1)))
        if state_path is not None and ((it + 1) % save_every == 0 or it + 1 == iters):
            state = dict(setting=setting, step=it + 1, seconds=time.time() - t0, log=log, head=head.state_dict(),
                         optimizer=opt.state_dict(), schedule=sched.state_dict(), generator=gen.get_state())
            torch.save(state, state_path + ".tmp")
            os.replace(state_path + ".tmp", state_path)  # a stop while writing keeps the previous state
    return head.eval()


def predict(frozen, head, x, batch=50):
    """(class probabilities (N, K, H, W), affinities (N, O, H, W)) of the images ``x``."""
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


def sweep(probs, affs, gts, betas=BETAS, steps=STEPS, batch=100, offsets=NEIGHBOURS):
    """``{(beta, steps): mIoU}`` of the walk on one set of scenes; each beta walks once to its largest step count,
    scored at every count of ``steps`` on the way."""
    out = {}
    for beta in betas:
        done, parts = 0, [probs[i:i + batch].clone() for i in range(0, len(probs), batch)]
        for s in sorted(steps):
            labels = []
            for k, i in enumerate(range(0, len(probs), batch)):
                own = probs[i:i + batch].argmax(1)
                mask = own != 0
                parts[k] = random_walk(parts[k], affs[i:i + batch], mask, beta, s - done, offsets)
                labels.append(name_items(parts[k].clone(), own, mask))
            done = s
            out[(beta, s)] = score(gts, torch.cat(labels).numpy())["mIoU"]
    return out


def refined_model(segmentor, head, beta, steps, tol=None):
    """``segmentor`` (a scenes tag or ``local-dir:`` folder) rebuilt with ``refine``: ``head`` (an
    ``AffinityHead``) as its ``affinity_head`` and the walk of ``beta`` and ``steps`` (Chebyshev within ``tol``,
    default ``ZooEncoderDecoder.REFINE_DEFAULTS``'), in eval mode. The segmentor's weights are its own, bit for bit."""
    import zoo
    seg = zoo.load(segmentor)
    cfg = seg.zoo_config
    head_channels = head.net[0].out_channels
    refine = dict(channels=head_channels, radius=_radius_of(head.offsets), beta=int(beta), steps=int(steps))
    if tol is not None:
        refine["tol"] = float(tol)
    model = zoo.load(cfg["name"], task="seg", **{**cfg["args"], "refine": refine})
    state = {**seg.state_dict(), **{f"affinity_head.{k}": v for k, v in head.state_dict().items()}}
    model.load_state_dict(state, strict=True)
    model.pretrained_cfg = getattr(seg, "pretrained_cfg", None)
    return model.eval()


def _radius_of(offsets):
    """The ``radius`` whose ``offsets_within`` are ``offsets`` (ValueError if none is)."""
    offsets = tuple(tuple(o) for o in offsets)
    radius = max((dy * dy + dx * dx) ** 0.5 for dy, dx in offsets)
    if offsets_within(radius) != offsets:
        raise ValueError(f"offsets {offsets} are not the neighbours within any radius")
    return radius if radius != int(radius) else int(radius)


def save_refined(model, out_dir, record):
    """Write ``refined_model``'s published folder (float16 weights, as the bundled ones) without metrics: the
    segmentor's tag, dataset and training config, and under ``training.refine`` how the head was trained and the walk
    chosen (``record``, from ``analyse``). Score it with ``tools/test.py CONFIG --pretrained local-dir:OUT``."""
    import zoo
    if os.path.isdir(out_dir) and os.listdir(out_dir):
        raise FileExistsError(f"{out_dir} is not empty; give a new folder (nothing is overwritten)")
    pc = model.pretrained_cfg or {}
    training = dict((pc.get("extra") or {}).get("training") or {})
    training["refine"] = {k: record[k] for k in ("segmentor", "iters", "seed", "train", "tuning", "chosen")
                          if k in record}
    if "tuning" in training["refine"]:  # the sweep is in the probe's record; the folder keeps where it ran
        training["refine"]["tuning"] = {k: v for k, v in record["tuning"].items() if k in ("root", "first", "scenes")}
    return zoo.save_pretrained(model, out_dir, tag=pc.get("tag"), dataset=pc.get("dataset"),
                               config_name=pc.get("train_config"), label_names=pc.get("label_names"),
                               extra={"training": training}, dtype="float16")


def analyse(segmentor, out_dir, data_root="data/fashion_scenes", train_root="data/fashion_scenes40k",
            train_scenes=10000, tune_root="data/fashion_scenes80k", tune_first=40000, tune_scenes=500, iters=3000,
            seed=0, betas=BETAS, steps=STEPS, head_path=None, radius=1, refined_dir=None, resume=False):
    """Train the head on ``segmentor`` (a scenes tag or folder) for the neighbours within ``radius``, or read a trained
    one from ``head_path``, choose beta and steps on the tuning scenes, score the validation scenes; the hard
    ``region_labels`` are chosen and scored the same way beside them. Writes ``out_dir/affinity_head.pt`` and returns
    the record. With ``refined_dir``, also the segmentor with the head and the chosen walk as a published folder
    there (``save_refined``). The head's training state stays in ``out_dir/train_state.pt`` until the record is
    written; with ``resume``, a folder that a stopped ``analyse`` left (``resumable``) goes on from that state: the
    rest of the training, or none when it had finished (``train``)."""
    import zoo
    state_path = os.path.join(out_dir, STATE_FILE)
    for d in (out_dir, refined_dir):
        left = os.listdir(d) if d and os.path.isdir(d) else []
        if left and not (resume and d == out_dir and resumable(d)):
            hint = ", or resume=True (--resume) to go on from its head's training state" if resumable(d) else ""
            raise FileExistsError(f"{d} is not empty; give a new folder (nothing is overwritten){hint}")
    if resume and os.path.isfile(state_path + ".tmp"):
        os.remove(state_path + ".tmp")  # a state cut short while written; the one before it is whole
    seg = zoo.load(segmentor)
    frozen = _Frozen(seg)
    log, offsets = [], offsets_within(radius)
    if head_path is None:
        x, y = _load(train_root, "training", seg, 0, train_scenes)
        os.makedirs(out_dir, exist_ok=True)
        head = train(frozen, x, y, iters=iters, seed=seed, log=log, offsets=offsets, state_path=state_path)
        del x, y
    else:  # the training record stays with the run that trained it
        head = AffinityHead(frozen.channels, offsets=offsets)
        state = torch.load(head_path, map_location="cpu", weights_only=True)
        if state["net.6.weight"].shape[0] != len(offsets):
            raise ValueError(f"{head_path} predicts {state['net.6.weight'].shape[0]} neighbours, radius {radius} has "
                             f"{len(offsets)}; give the --radius it was trained with")
        head.load_state_dict(state)
        head.eval()
    os.makedirs(out_dir, exist_ok=True)
    torch.save(head.state_dict(), os.path.join(out_dir, "affinity_head.pt"))  # before the scoring, which is long
    xt, yt = _load(tune_root, "training", seg, tune_first, tune_scenes)
    pt, at = predict(frozen, head, xt)
    tuning = sweep(pt, at, yt.numpy(), betas, steps, offsets=offsets)
    beta, n = max(tuning, key=tuning.get)
    tuning_regions = {t: score(yt.numpy(), region_labels(pt, at, t, offsets=offsets).numpy())["mIoU"]
                      for t in THRESHOLDS}
    threshold = max(tuning_regions, key=tuning_regions.get)
    xv, yv = _load(data_root, "validation", seg)
    pv, av = predict(frozen, head, xv)
    hits, item_hits, items = [], [], yv > 0
    for k, (o, (same, valid)) in enumerate(zip(offsets, affinity_targets(yv, offsets=offsets))):
        hit = (pair_views(av[:, k], o)[0] > 0.5).float() == same
        ia, ib = pair_views(items, o)
        hits.append(hit[valid])
        item_hits.append(hit[ia & ib])
    record = dict(
        segmentor=segmentor, head=head_path, iters=iters, seed=seed, radius=radius, offsets=[list(o) for o in offsets],
        train=dict(root=train_root, scenes=train_scenes), curve=log,
        tuning=dict(root=tune_root, first=tune_first, scenes=tune_scenes,
                    mIoU={f"beta {b}, {s} steps": v for (b, s), v in tuning.items()},
                    regions_mIoU={f"threshold {t}": v for t, v in tuning_regions.items()},
                    segmentor_mIoU=score(yt.numpy(), pt.argmax(1).numpy())["mIoU"]),
        chosen=dict(beta=beta, steps=n, threshold=threshold),
        validation=dict(segmentor=score(yv.numpy(), pv.argmax(1).numpy()),
                        walked=score(yv.numpy(), walked_labels(pv, av, beta, n, offsets=offsets).numpy()),
                        regions=score(yv.numpy(), region_labels(pv, av, threshold, offsets=offsets).numpy()),
                        affinity_accuracy=100 * float(torch.cat(hits).float().mean()),
                        affinity_accuracy_item_pairs=100 * float(torch.cat(item_hits).float().mean())))
    with open(os.path.join(out_dir, "record.json"), "w") as f:
        json.dump(errors.rounded(record), f, indent=1)
    if refined_dir:
        save_refined(refined_model(segmentor, head, beta, n), refined_dir, record)
    if os.path.isfile(state_path):
        os.remove(state_path)  # the analysis is complete: nothing to resume
    return record


def resumable(out_dir):
    """Whether ``out_dir`` is what a stopped ``analyse`` leaves: its head's training state, and at most the files
    written after it (the state cut short while written, the head, the record)."""
    left = set(os.listdir(out_dir)) if os.path.isdir(out_dir) else set()
    return STATE_FILE in left and left <= {STATE_FILE, STATE_FILE + ".tmp", "affinity_head.pt", "record.json"}


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
    p.add_argument("--head", help="an affinity_head.pt trained before (with the same --iters, --train-scenes and "
                                  "--seed, which the record repeats): no training, only the choice and the score")
    p.add_argument("--betas", type=int, nargs="+", default=list(BETAS))
    p.add_argument("--steps", type=int, nargs="+", default=list(STEPS))
    p.add_argument("--radius", type=float, default=1, help="affinities to every neighbour within this distance "
                                                           "(1: right and down, 2: 6 offsets, 3: 14)")
    p.add_argument("--save-refined", metavar="DIR", help="also write the segmentor with the head and the chosen walk "
                                                         "as a published folder (score it with tools/test.py "
                                                         "--pretrained local-dir:DIR)")
    p.add_argument("--resume", action="store_true", help="--out holds the state of an interrupted head training "
                                                             "(train_state.pt, written every 500 steps): go on from it")
    a = p.parse_args()
    rec = analyse(a.segmentor, a.out, a.data, a.train_data, a.train_scenes, a.tune_data, a.tune_first,
                  a.tune_scenes, a.iters, a.seed, tuple(a.betas), tuple(a.steps), a.head, a.radius, a.save_refined,
                  a.resume)
    print(json.dumps(errors.rounded(dict(chosen=rec["chosen"], tuning=rec["tuning"],
                                         validation={k: (v["mIoU"] if isinstance(v, dict) else v)
                                                     for k, v in rec["validation"].items()})), indent=1))
