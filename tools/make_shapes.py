#!/usr/bin/env python
"""Make a procedural, part-labelled shape set in the ModelNet40 HDF5 and ShapeNetPart layouts.

Every shape is a union of primitives (boxes, cylinders, cones, ellipsoids, torus arcs) with random proportions,
grouped into 2 to 4 labelled parts and rotated by a random angle about the up axis (y), then centred and scaled
into the unit sphere. Points are sampled on the primitive surfaces in proportion to area, with exact normals.
Twelve categories reuse ShapeNetPart's names, synsets and global part ids (categories whose part count fits
2-4 parts), so the part-segmentation configs run on it unchanged::

    Airplane 0 body 1 wing 2 tail 3 engine       Bag 4 handle 5 body          Cap 6 crown 7 peak
    Car 8 roof 9 hood 10 wheel 11 body            Chair 12 back 13 seat 14 leg 15 arm (arms in half the chairs)
    Guitar 19 head 20 neck 21 body                Knife 22 blade 23 handle     Lamp 24 base 25 shade 26 canopy 27 tube
    Laptop 28 keyboard 29 screen                  Mug 36 handle 37 body        Rocket 41 body 42 fin 43 nose
    Table 47 top 48 leg 49 drawer (drawer in half the tables)

Output (``--out DIR``)::

    DIR/modelnet40_ply_hdf5_2048/ply_data_{train,test}0.h5  (data (S, 2048, 3), normal, label (S, 1) uint8)
                                 shape_names.txt, {train,test}_files.txt
    DIR/shapenetcore_partanno_segmentation_benchmark_v0_normal/synsetoffset2category.txt,
        train_test_split/shuffled_{train,val,test}_file_list.json, <synset>/<token>.txt ("x y z nx ny nz part")

The same ``--seed`` gives byte-identical files.

    python tools/make_shapes.py --out data/shapes --seed 0
"""
import argparse
import json
import os
import os.path as osp

import numpy as np

SYNSETS = {"Airplane": "02691156", "Bag": "02773838", "Cap": "02954340", "Car": "02958343", "Chair": "03001627",
           "Guitar": "03467517", "Knife": "03624134", "Lamp": "03636649", "Laptop": "03642806", "Mug": "03797390",
           "Rocket": "04099429", "Table": "04379243"}


# -- primitives: each returns (area, sampler(rng, n) -> (points (n, 3), normals (n, 3))) in local coordinates --
def box(sx, sy, sz):
    half = np.array([sx, sy, sz]) / 2
    areas = np.array([sy * sz, sy * sz, sx * sz, sx * sz, sx * sy, sx * sy])

    def sample(rng, n):
        face = rng.choice(6, n, p=areas / areas.sum())
        axis, sign = face // 2, np.where(face % 2 == 0, 1.0, -1.0)
        p = rng.uniform(-1, 1, (n, 3)) * half
        p[np.arange(n), axis] = sign * half[axis]
        nrm = np.zeros((n, 3))
        nrm[np.arange(n), axis] = sign
        return p, nrm
    return areas.sum(), sample


def cylinder(r, h, caps=True):
    """Axis y, centred at the origin."""
    lateral, cap = 2 * np.pi * r * h, np.pi * r * r if caps else 0.0

    def sample(rng, n):
        kind = rng.choice(3, n, p=np.array([lateral, cap, cap]) / (lateral + 2 * cap))
        t = rng.uniform(0, 2 * np.pi, n)
        rad = np.where(kind == 0, r, r * np.sqrt(rng.uniform(0, 1, n)))
        y = np.where(kind == 0, rng.uniform(-h / 2, h / 2, n), np.where(kind == 1, h / 2, -h / 2))
        p = np.stack([rad * np.cos(t), y, rad * np.sin(t)], 1)
        nrm = np.where((kind == 0)[:, None], np.stack([np.cos(t), np.zeros(n), np.sin(t)], 1),
                       np.stack([np.zeros(n), np.where(kind == 1, 1.0, -1.0), np.zeros(n)], 1))
        return p, nrm
    return lateral + 2 * cap, sample


def cone(r, h):
    """Open cone, axis y, base (radius r) at y = 0, apex at y = h."""
    slant = np.hypot(r, h)

    def sample(rng, n):
        s = np.sqrt(rng.uniform(0, 1, n))  # uniform in area: radius grows linearly from the apex
        t = rng.uniform(0, 2 * np.pi, n)
        p = np.stack([s * r * np.cos(t), h * (1 - s), s * r * np.sin(t)], 1)
        nrm = np.stack([h * np.cos(t), np.full(n, r), h * np.sin(t)], 1) / slant
        return p, nrm
    return np.pi * r * slant, sample


def ellipsoid(a, b, c, upper=False):
    """Semi-axes a, b, c; ``upper`` keeps the y >= 0 half."""
    p_ = 1.6075
    area = 4 * np.pi * (((a * b) ** p_ + (a * c) ** p_ + (b * c) ** p_) / 3) ** (1 / p_) / (2 if upper else 1)

    def sample(rng, n):
        u = rng.normal(size=(n, 3))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        if upper:
            u[:, 1] = np.abs(u[:, 1])
        p = u * [a, b, c]
        nrm = p / np.square([a, b, c])
        return p, nrm / np.linalg.norm(nrm, axis=1, keepdims=True)
    return area, sample


def torus_arc(R, r, arc=np.pi):
    """Torus in the xy plane (around z), major angle in [0, arc] starting at +x."""
    def sample(rng, n):
        u, v = rng.uniform(0, arc, n), rng.uniform(0, 2 * np.pi, n)
        ring = np.stack([np.cos(u), np.sin(u), np.zeros(n)], 1)
        nrm = ring * np.cos(v)[:, None] + np.array([0, 0, 1.0]) * np.sin(v)[:, None]
        return R * ring + r * nrm, nrm
    return arc * R * 2 * np.pi * r, sample


def rot(axis, angle):
    c, s = np.cos(angle), np.sin(angle)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    m = np.eye(3)
    m[i, i], m[i, j], m[j, i], m[j, j] = c, -s, s, c
    return m


def place(prim, at=(0, 0, 0), R=None):
    return (prim, np.asarray(at, float), np.eye(3) if R is None else R)


# -- categories: each returns {part id: [placed primitives]} ------------------------------------------------------
def airplane(g):
    L, r, span, chord = g.uniform(1.6, 2.2), g.uniform(0.09, 0.15), g.uniform(1.4, 2.0), g.uniform(0.3, 0.5)
    zx = rot(2, np.pi / 2)  # cylinder axis y -> x
    parts = {0: [place(cylinder(r, L), R=zx), place(ellipsoid(0.25, r, r), (L / 2, 0, 0))],
             1: [place(box(chord, 0.03, span), (g.uniform(-0.1, 0.15), 0, 0))],
             2: [place(box(0.25, g.uniform(0.25, 0.4), 0.03), (-L / 2 + 0.12, r + 0.15, 0)),
                 place(box(0.2, 0.02, g.uniform(0.4, 0.7)), (-L / 2 + 0.1, r, 0))]}
    ez = g.uniform(0.25, 0.45) * span
    parts[3] = [place(cylinder(0.06, 0.35), (0.1, -0.1, s * ez), zx) for s in (-1, 1)]
    return parts


def bag(g):
    w, h, d = g.uniform(0.8, 1.2), g.uniform(0.6, 1.0), g.uniform(0.25, 0.45)
    return {5: [place(box(w, h, d))], 4: [place(torus_arc(g.uniform(0.2, 0.35) * w, 0.03), (0, h / 2, 0))]}


def cap(g):
    a, b = g.uniform(0.45, 0.6), g.uniform(0.3, 0.45)
    return {6: [place(ellipsoid(a, b, a, upper=True))],
            7: [place(box(g.uniform(0.3, 0.5), 0.02, 0.7 * a * 2), (a + 0.15, 0.01, 0))]}


def car(g):
    L, W, H = g.uniform(1.6, 2.2), g.uniform(0.7, 0.9), g.uniform(0.3, 0.45)
    wr = g.uniform(0.15, 0.2)
    parts = {11: [place(box(L, H, W), (0, wr + H / 2, 0))],
             8: [place(box(L * g.uniform(0.4, 0.55), H * 0.8, W * 0.9), (-0.1, wr + H * 1.4, 0))],
             9: [place(box(L * 0.25, 0.04, W * 0.9), (L * 0.35, wr + H + 0.02, 0))]}
    xz = rot(0, np.pi / 2)  # wheel axis y -> z
    parts[10] = [place(cylinder(wr, 0.12), (sx * L * 0.32, wr, sz * W / 2), xz) for sx in (-1, 1) for sz in (-1, 1)]
    return parts


def chair(g):
    w, d, sh, bh, t = g.uniform(0.8, 1.1), g.uniform(0.8, 1.0), g.uniform(0.7, 0.9), g.uniform(0.8, 1.2), 0.08
    parts = {13: [place(box(w, t, d), (0, sh, 0))],
             12: [place(box(w, bh, t), (0, sh + bh / 2, -d / 2 + t / 2), rot(0, g.uniform(-0.2, 0.0)))],
             14: [place(box(t, sh, t), (sx * (w / 2 - t), sh / 2, sz * (d / 2 - t)))
                  for sx in (-1, 1) for sz in (-1, 1)]}
    if g.random() < 0.5:
        parts[15] = [place(box(t, t, d * 0.8), (sx * (w / 2 + t / 2), sh + 0.3, 0)) for sx in (-1, 1)]
    return parts


def guitar(g):
    bl, nl = g.uniform(0.8, 1.1), g.uniform(0.8, 1.2)
    return {21: [place(ellipsoid(bl / 2, g.uniform(0.3, 0.4), 0.12)),
                 place(ellipsoid(bl / 3, 0.25, 0.12), (bl / 2, 0, 0))],
            20: [place(box(nl, 0.08, 0.05), (bl / 2 + nl / 2, 0, 0.05))],
            19: [place(box(0.25, 0.14, 0.06), (bl / 2 + nl + 0.12, 0, 0.05))]}


def knife(g):
    bl, hl = g.uniform(1.0, 1.5), g.uniform(0.5, 0.7)
    zx = rot(2, np.pi / 2)
    return {22: [place(box(bl, g.uniform(0.15, 0.25), 0.02), (bl / 2, 0, 0))],
            23: [place(cylinder(g.uniform(0.05, 0.08), hl), (-hl / 2, 0, 0), zx)]}


def lamp(g):
    H, br = g.uniform(1.2, 1.8), g.uniform(0.25, 0.4)
    sr = g.uniform(0.3, 0.5)
    return {24: [place(cylinder(br, 0.08), (0, 0.04, 0))],
            27: [place(cylinder(0.03, H, caps=False), (0, H / 2, 0))],
            26: [place(ellipsoid(0.08, 0.08, 0.08), (0, H, 0))],
            25: [place(cone(sr, sr * g.uniform(0.8, 1.3)), (0, H - 0.2, 0))]}


def laptop(g):
    w, d = g.uniform(1.0, 1.4), g.uniform(0.7, 0.9)
    a = g.uniform(0.3, 1.2)  # screen opening from vertical
    Rs = rot(0, -a)
    return {28: [place(box(w, 0.05, d), (0, 0.025, 0))],
            29: [place(box(w, d, 0.03), np.array([0, 0.05, -d / 2]) + Rs @ np.array([0, d / 2, 0]), Rs)]}


def mug(g):
    r, h = g.uniform(0.3, 0.45), g.uniform(0.7, 1.1)
    return {37: [place(cylinder(r, h), (0, h / 2, 0))],
            36: [place(torus_arc(g.uniform(0.18, 0.25), 0.04, np.pi), (r, h / 2, 0), rot(2, -np.pi / 2))]}


def rocket(g):
    r, h = g.uniform(0.15, 0.25), g.uniform(1.5, 2.2)
    nf = int(g.integers(3, 5))
    fins = [place(box(0.02, 0.4, 0.3), (0, 0.2, 0), rot(1, 2 * np.pi * i / nf) @ np.eye(3)) for i in range(nf)]
    fins = [(p, R @ np.array([0, 0.2, r + 0.15]), R) for p, _, R in fins]
    return {41: [place(cylinder(r, h), (0, h / 2, 0))], 43: [place(cone(r, r * g.uniform(2, 3)), (0, h, 0))],
            42: fins}


def table(g):
    w, d, h, t = g.uniform(1.2, 1.8), g.uniform(0.7, 1.0), g.uniform(0.6, 0.8), 0.06
    parts = {47: [place(box(w, t, d), (0, h, 0))],
             48: [place(box(t, h, t), (sx * (w / 2 - t), h / 2, sz * (d / 2 - t))) for sx in (-1, 1) for sz in (-1, 1)]}
    if g.random() < 0.5:
        parts[49] = [place(box(w * 0.4, 0.15, d * 0.8), (w * 0.15, h - 0.11, 0))]
    return parts


CATEGORIES = {"Airplane": airplane, "Bag": bag, "Cap": cap, "Car": car, "Chair": chair, "Guitar": guitar,
              "Knife": knife, "Lamp": lamp, "Laptop": laptop, "Mug": mug, "Rocket": rocket, "Table": table}


def make_shape(name, rng, num_points):
    """Sample one shape: points (n, 3), normals (n, 3), global part ids (n,), all float32/int64."""
    prims = [(pid, prim, at, R) for pid, placed in sorted(CATEGORIES[name](rng).items()) for prim, at, R in placed]
    areas = np.array([prim[0] for _, prim, _, _ in prims])
    counts = rng.multinomial(num_points, areas / areas.sum())
    pts, nrms, seg = [], [], []
    for (pid, (_, sample), at, R), n in zip(prims, counts):
        p, nrm = sample(rng, n)
        pts.append(p @ R.T + at)
        nrms.append(nrm @ R.T)
        seg.append(np.full(n, pid))
    pts, nrms, seg = np.concatenate(pts), np.concatenate(nrms), np.concatenate(seg)
    up = rot(1, rng.uniform(0, 2 * np.pi))  # random rotation about the up axis
    pts, nrms = pts @ up.T, nrms @ up.T
    pts -= pts.mean(0)
    pts /= np.linalg.norm(pts, axis=1).max()
    order = rng.permutation(num_points)
    return pts[order].astype(np.float32), nrms[order].astype(np.float32), seg[order]


def write_modelnet(out, rng, per_class):
    import h5py
    root = osp.join(out, "modelnet40_ply_hdf5_2048")
    os.makedirs(root, exist_ok=True)
    names = list(CATEGORIES)
    with open(osp.join(root, "shape_names.txt"), "w") as f:
        f.write("".join(n.lower() + "\n" for n in names))
    for split, count in per_class.items():
        labels = np.repeat(np.arange(len(names)), count)
        labels = labels[rng.permutation(len(labels))]
        shapes = [make_shape(names[c], rng, 2048) for c in labels]
        path = osp.join(root, f"ply_data_{split}0.h5")
        with h5py.File(path, "w", libver="earliest", track_order=False) as f:
            for key, arr in (("data", np.stack([s[0] for s in shapes])), ("normal", np.stack([s[1] for s in shapes])),
                             ("label", labels.astype(np.uint8)[:, None])):
                f.create_dataset(key, data=arr, track_times=False)
        with open(osp.join(root, f"{split}_files.txt"), "w") as f:
            f.write(f"data/modelnet40_ply_hdf5_2048/ply_data_{split}0.h5\n")
    return root


def write_shapenetpart(out, rng, per_class):
    root = osp.join(out, "shapenetcore_partanno_segmentation_benchmark_v0_normal")
    os.makedirs(osp.join(root, "train_test_split"), exist_ok=True)
    with open(osp.join(root, "synsetoffset2category.txt"), "w") as f:
        f.write("".join(f"{n}\t{SYNSETS[n]}\n" for n in CATEGORIES))
    for split, count in per_class.items():
        entries = []
        for name in CATEGORIES:
            os.makedirs(osp.join(root, SYNSETS[name]), exist_ok=True)
            for _ in range(count):
                token = "".join(f"{b:02x}" for b in rng.integers(0, 256, 16))
                pts, nrm, seg = make_shape(name, rng, int(rng.integers(2048, 2817)))
                rows = np.concatenate([pts, nrm, seg[:, None].astype(np.float32)], 1)
                np.savetxt(osp.join(root, SYNSETS[name], f"{token}.txt"), rows, fmt="%.6f")
                entries.append(f"shape_data/{SYNSETS[name]}/{token}")
        entries = [entries[i] for i in rng.permutation(len(entries))]
        with open(osp.join(root, "train_test_split", f"shuffled_{split}_file_list.json"), "w") as f:
            json.dump(entries, f)
    return root


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (both layouts are written under it)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=80, help="shapes per category in the training split")
    ap.add_argument("--val", type=int, default=10, help="shapes per category in ShapeNetPart's val split")
    ap.add_argument("--test", type=int, default=20, help="shapes per category in the test split")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    a = write_modelnet(args.out, rng, {"train": args.train, "test": args.test})
    b = write_shapenetpart(args.out, rng, {"train": args.train, "val": args.val, "test": args.test})
    print(f"wrote {a} and {b} ({len(CATEGORIES)} categories)")


if __name__ == "__main__":
    main()
