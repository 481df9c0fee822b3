"""Compose a semantic-segmentation set from real Fashion-MNIST items, written in the ADE20K layout.

Each scene is a ``size`` x ``size`` canvas with a smooth random background on which 2 to 5 Fashion-MNIST items
(Xiao et al., 2017, https://arxiv.org/abs/1708.07747, MIT licence) are pasted at random scales and positions, each
tinted with a random colour; later items occlude earlier ones. An item covers the pixels where its (resized)
intensity exceeds ``--threshold``. Training scenes use items from ``train-*``, validation scenes items from
``t10k-*``, so no item is shared between the splits. Output (the ADE20K layout mmseg reads)::

    OUT/images/training/scene_000000.jpg       OUT/annotations/training/scene_000000.png
    OUT/images/validation/scene_000000.jpg     OUT/annotations/validation/scene_000000.png

Label maps are single-channel PNG: 0 = background, k + 1 = Fashion-MNIST class k (1..10). The output is a pure
function of the arguments: the same seed writes identical bytes.

    python tools/make_scenes.py --out data/fashion_scenes --seed 0 --num-train 2000 --num-val 500 --size 64
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo.datasets import FASHION_MNIST_ROOT as FMNIST, read_fashion_mnist  # noqa: E402


def load_split(root, split):
    """Fashion-MNIST ``train`` or ``t10k``: (images (N, 28, 28) uint8, labels (N,) uint8)."""
    return read_fashion_mnist(root, "test" if split == "t10k" else split)


def background(rng, size):
    """A smooth dark random background (size, size, 3) uint8: a bilinear-upsampled 4x4 colour grid plus noise."""
    coarse = rng.integers(0, 100, size=(4, 4, 3), dtype=np.uint8)
    bg = np.asarray(Image.fromarray(coarse).resize((size, size), Image.BILINEAR), dtype=np.float32)
    bg += rng.normal(0.0, 6.0, size=bg.shape)
    return np.clip(bg, 0, 255)


def compose(rng, images, labels, size=64, min_items=2, max_items=5, scale=(0.6, 1.6), threshold=40, placed=None):
    """One scene: (image (size, size, 3) uint8, label map (size, size) uint8).

    ``placed``, a list, receives one ``(item index, y, x, intensity (side, side) float32, mask (side, side) bool)``
    per item in paint order: what was pasted where (``tasks.seg.oracle`` replays scenes with it); it changes nothing
    else.
    """
    canvas = background(rng, size)
    label = np.zeros((size, size), dtype=np.uint8)
    for _ in range(int(rng.integers(min_items, max_items + 1))):
        i = int(rng.integers(len(images)))
        side = int(round(28 * rng.uniform(*scale)))
        side = min(side, size)
        item = np.asarray(Image.fromarray(images[i]).resize((side, side), Image.BILINEAR), dtype=np.float32)
        y, x = (int(v) for v in rng.integers(0, size - side + 1, size=2))
        mask = item > threshold  # (side, side): where the item is
        colour = rng.uniform(110, 255, size=3).astype(np.float32)
        rgb = item[..., None] / 255.0 * colour  # (side, side, 3)
        region = canvas[y:y + side, x:x + side]
        region[mask] = rgb[mask]  # later items occlude earlier ones
        label[y:y + side, x:x + side][mask] = int(labels[i]) + 1
        if placed is not None:
            placed.append((i, y, x, item, mask))
    return np.clip(np.rint(canvas), 0, 255).astype(np.uint8), label


def write_split(out, split_name, images, labels, num, rng, size, **kwargs):
    img_dir = os.path.join(out, "images", split_name)
    ann_dir = os.path.join(out, "annotations", split_name)
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(ann_dir, exist_ok=True)
    counts = np.zeros(11, dtype=np.int64)
    for n in range(num):
        img, lab = compose(rng, images, labels, size=size, **kwargs)
        Image.fromarray(img).save(os.path.join(img_dir, f"scene_{n:06d}.jpg"), quality=95)
        Image.fromarray(lab, mode="L").save(os.path.join(ann_dir, f"scene_{n:06d}.png"))
        counts += np.bincount(lab.ravel(), minlength=11)
    return counts


def make_scenes(out, seed=0, num_train=2000, num_val=500, size=64, fmnist=FMNIST, **kwargs):
    """Write the scenes under ``out``; returns per-class pixel counts ``{split: counts (11,)}``."""
    if size < 28:
        raise ValueError(f"--size must be at least 28 (one item), got {size}")
    result = {}
    for split, name, num in (("train", "training", num_train), ("t10k", "validation", num_val)):
        images, labels = load_split(fmnist, split)
        result[name] = write_split(out, name, images, labels, num, split_rng(seed, name), size, **kwargs)
    return result


def split_rng(seed, name):
    """The random stream of split ``name`` (``training`` or ``validation``): one independent stream per split, both
    derived from the seed, so the validation set does not change when the number of training scenes does."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[("training", "validation").index(name)])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="output folder (ADE20K layout)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-train", type=int, default=2000)
    p.add_argument("--num-val", type=int, default=500)
    p.add_argument("--size", type=int, default=64, help="canvas side in pixels")
    p.add_argument("--min-items", type=int, default=2)
    p.add_argument("--max-items", type=int, default=5)
    p.add_argument("--threshold", type=int, default=40, help="item mask: resized pixel intensity above this")
    p.add_argument("--fmnist", default=FMNIST, help="folder with the Fashion-MNIST IDX .gz files")
    a = p.parse_args(argv)
    counts = make_scenes(a.out, seed=a.seed, num_train=a.num_train, num_val=a.num_val, size=a.size, fmnist=a.fmnist,
                         min_items=a.min_items, max_items=a.max_items, threshold=a.threshold)
    for split, c in counts.items():
        frac = c / c.sum()
        print(f"{split}: background {frac[0]:.3f} of pixels; classes 1..10: "
              + " ".join(f"{f:.3f}" for f in frac[1:]))
    print(f"wrote {a.num_train} training and {a.num_val} validation scenes to {a.out}")


if __name__ == "__main__":
    main()
