"""Small pictures of what a model does, as PNG files (Pillow only): image grids, label maps, point clouds."""
import os
import os.path as osp

import numpy as np


def palette(n, seed=0):
    """``n`` distinct RGB colours (uint8, (n, 3)); colour 0 is a dark grey, for the background."""
    rng = np.random.default_rng(seed)
    hues = (np.arange(n) * 0.61803398875) % 1.0  # golden-ratio steps keep neighbours apart
    sat, val = 0.65 + 0.3 * rng.random(n), 0.75 + 0.25 * rng.random(n)
    i = np.floor(hues * 6).astype(int) % 6
    f = hues * 6 - np.floor(hues * 6)
    p, q, t = val * (1 - sat), val * (1 - f * sat), val * (1 - (1 - f) * sat)
    table = np.stack([np.choose(i, [val, q, p, p, t, val]), np.choose(i, [t, val, val, q, p, p]),
                      np.choose(i, [p, p, t, val, val, q])], axis=1)
    out = (table * 255).round().astype(np.uint8)
    out[0] = (40, 40, 40)
    return out


def tile(images, ncol, pad=2, fill=255):
    """Equal-size uint8 images ``(H, W, 3)`` -> one grid image with ``pad`` px borders, ``ncol`` per row."""
    h, w = images[0].shape[:2]
    nrow = (len(images) + ncol - 1) // ncol
    grid = np.full((nrow * (h + pad) + pad, ncol * (w + pad) + pad, 3), fill, np.uint8)
    for k, img in enumerate(images):
        r, c = divmod(k, ncol)
        grid[pad + r * (h + pad):pad + r * (h + pad) + h, pad + c * (w + pad):pad + c * (w + pad) + w] = img
    return grid


def to_rgb(image):
    """An image as uint8 ``(H, W, 3)``: from a tensor or array ``(C, H, W)`` or ``(H, W[, C])``, grey repeated.

    Floats are taken as [-1, 1] (generator output) and mapped to 0..255.
    """
    a = np.asarray(image.detach().cpu() if hasattr(image, "detach") else image)
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[2] not in (1, 3):
        a = a.transpose(1, 2, 0)
    if a.dtype != np.uint8:
        a = ((np.clip(a.astype(np.float64), -1, 1) + 1) * 127.5).round().astype(np.uint8)
    if a.ndim == 2:
        a = a[..., None]
    return np.repeat(a, 3, axis=2) if a.shape[2] == 1 else a


def label_map(labels, colours, ignore=255):
    """A label map ``(H, W)`` as colours; ``ignore`` pixels white."""
    labels = np.asarray(labels)
    out = colours[np.clip(labels, 0, len(colours) - 1)]
    out[labels == ignore] = 255
    return out


def point_cloud(points, labels, colours, size=192, elev=25.0, azim=35.0):
    """Points ``(N, 3)`` coloured by ``labels``, drawn far-to-near in an orthographic view (uint8 ``(size, size, 3)``)."""
    from PIL import Image, ImageDraw
    p = np.asarray(points, np.float64)
    p = p - p.mean(0)
    a, e = np.radians(azim), np.radians(elev)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(e), -np.sin(e)], [0, np.sin(e), np.cos(e)]])
    q = p @ rz.T @ rx.T  # x right, y depth, z up
    scale = 0.45 * size / max(np.abs(q[:, [0, 2]]).max(), 1e-9)
    img = Image.new("RGB", (size, size), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    for k in np.argsort(-q[:, 1]):  # far points first, near ones drawn over them
        x, y = size / 2 + scale * q[k, 0], size / 2 - scale * q[k, 2]
        draw.ellipse((x - 2, y - 2, x + 2, y + 2), fill=tuple(int(c) for c in colours[int(labels[k])]))
    return np.asarray(img)


def sample_grid(generator, n=64, seed=0, ncol=8):
    """``n`` samples of a zoo generator (``model.sample(n, seed=...)``) as one uint8 grid image, ``ncol`` per row."""
    import torch
    with torch.no_grad():
        images = generator.sample(n, seed=seed)
    return tile([to_rgb(x) for x in images], ncol=ncol)


def save_png(array, path):
    """Save a uint8 ``(H, W, 3)`` array as a PNG, creating the folder."""
    from PIL import Image
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    Image.fromarray(np.ascontiguousarray(array)).save(path)
    return path
