"""Classification transforms on ``HxWxC`` uint8 numpy images (PIL for decoding and resizing; no torchvision).

Each transform is a callable on the sample dict, registered in mmengine's ``TRANSFORMS`` so configs name them:
``ClsLoadImage`` (RGB through PIL), ``ClsResize`` (shorter side), ``ClsPad``, ``ClsRandomCrop`` (padded random
window, the CIFAR-style crop), ``ClsRandomResizedCrop`` (Szegedy et al., Inception v1 / the DeiT training crop) and
``PackClsInputs`` (normalise, to a ``CxHxW`` float tensor). Where mmcv already has the transform, configs use
mmcv's: ``RandomFlip`` (``prob``, ``direction='horizontal'``) and ``CenterCrop`` (``crop_size``), registered in the
same registry by importing ``mmcv.transforms`` here. mmcv has no shorter-side resize, padded random crop or random
resized crop (those live in mmpretrain, which this project does not install), and its image loader returns BGR, so
those stay. Random choices draw from numpy's global generator, which mmengine seeds per worker and rank.
"""
import math

import numpy as np
import torch
import mmcv.transforms  # noqa: F401  (registers mmcv's RandomFlip, CenterCrop in mmengine's TRANSFORMS)
from mmengine.registry import TRANSFORMS
from PIL import Image

_INTERP = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC,
           "lanczos": Image.LANCZOS}


def _pair(size):
    return (int(size), int(size)) if isinstance(size, (int, float)) else (int(size[0]), int(size[1]))


def _resize(img, hw, interpolation):
    """Resize an HxWxC uint8 array to ``hw`` = (h, w) with PIL."""
    if interpolation not in _INTERP:
        raise ValueError(f"interpolation must be one of {', '.join(_INTERP)}, got {interpolation!r}")
    if img.shape[:2] == tuple(hw):
        return img
    pil = Image.fromarray(img[:, :, 0] if img.shape[2] == 1 else img)
    out = np.asarray(pil.resize((hw[1], hw[0]), _INTERP[interpolation]))
    return out[:, :, None] if out.ndim == 2 else out


@TRANSFORMS.register_module()
class ClsLoadImage:
    """Decode ``results['img_path']`` into ``results['img']`` (HxWx3 RGB, or HxWx1 for ``color_type='grayscale'``)."""

    def __init__(self, color_type="color"):
        if color_type not in ("color", "grayscale"):
            raise ValueError(f"color_type must be 'color' or 'grayscale', got {color_type!r}")
        self.mode = "RGB" if color_type == "color" else "L"

    def __call__(self, results):
        path = results["img_path"]
        try:
            with Image.open(path) as im:
                img = np.asarray(im.convert(self.mode))
        except (OSError, ValueError) as e:
            raise OSError(f"cannot decode image {path}: {e}") from e
        results["img"] = img[:, :, None] if img.ndim == 2 else img
        results["ori_shape"] = img.shape[:2]
        return results


@TRANSFORMS.register_module()
class ClsResize:
    """Resize to ``size``: an int sets the shorter side (aspect kept), a pair sets (h, w)."""

    def __init__(self, size, interpolation="bilinear"):
        self.size, self.interpolation = size, interpolation

    def __call__(self, results):
        img = results["img"]
        h, w = img.shape[:2]
        if isinstance(self.size, (int, float)):
            s = int(self.size)
            hw = (s, max(1, round(w * s / h))) if h <= w else (max(1, round(h * s / w)), s)
        else:
            hw = _pair(self.size)
        results["img"] = _resize(img, hw, self.interpolation)
        return results


@TRANSFORMS.register_module()
class ClsPad:
    """Pad by ``padding`` pixels on every side, and/or (centred) up to at least ``size`` (int or (h, w))."""

    def __init__(self, size=None, padding=0, value=0):
        self.size = _pair(size) if size is not None else None
        self.padding, self.value = int(padding), value

    def __call__(self, results):
        img = results["img"]
        h, w = img.shape[:2]
        p = self.padding
        top = bottom = left = right = p
        if self.size is not None:
            extra_h, extra_w = max(self.size[0] - h - 2 * p, 0), max(self.size[1] - w - 2 * p, 0)
            top, left = top + extra_h // 2, left + extra_w // 2
            bottom, right = bottom + extra_h - extra_h // 2, right + extra_w - extra_w // 2
        if top or bottom or left or right:
            img = np.pad(img, ((top, bottom), (left, right), (0, 0)), constant_values=self.value)
        results["img"] = img
        return results


@TRANSFORMS.register_module()
class ClsRandomCrop:
    """Pad by ``padding`` then crop a random ``size`` window (the CIFAR/MNIST-style shift augmentation)."""

    def __init__(self, size, padding=0, value=0):
        self.size = _pair(size)
        self.pad = ClsPad(size=self.size, padding=padding, value=value)

    def __call__(self, results):
        img = self.pad(dict(img=results["img"]))["img"]
        h, w = img.shape[:2]
        th, tw = self.size
        top, left = np.random.randint(0, h - th + 1), np.random.randint(0, w - tw + 1)
        results["img"] = img[top:top + th, left:left + tw]
        return results


@TRANSFORMS.register_module()
class ClsRandomResizedCrop:
    """Crop a random area fraction in ``scale`` with aspect ratio in ``ratio`` (log-uniform), resize to ``size``.

    The Inception / DeiT training crop; after 10 failed draws it falls back to the central crop of the nearest
    allowed aspect ratio.
    """

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), interpolation="bicubic"):
        self.size, self.scale, self.ratio, self.interpolation = _pair(size), scale, ratio, interpolation

    def _window(self, h, w):
        area = h * w
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * np.random.uniform(*self.scale)
            aspect = math.exp(np.random.uniform(*log_ratio))
            cw, ch = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
            if 0 < cw <= w and 0 < ch <= h:
                return np.random.randint(0, h - ch + 1), np.random.randint(0, w - cw + 1), ch, cw
        aspect = w / h
        if aspect < min(self.ratio):
            cw, ch = w, int(round(w / min(self.ratio)))
        elif aspect > max(self.ratio):
            ch, cw = h, int(round(h * max(self.ratio)))
        else:
            ch, cw = h, w
        return (h - ch) // 2, (w - cw) // 2, ch, cw

    def __call__(self, results):
        img = results["img"]
        top, left, ch, cw = self._window(*img.shape[:2])
        results["img"] = _resize(img[top:top + ch, left:left + cw], self.size, self.interpolation)
        return results


@TRANSFORMS.register_module()
class PackClsInputs:
    """Normalise ``(img - mean) / std`` (per channel, 0..255 scale) into ``inputs`` (CxHxW float32 tensor) and put
    the label in ``data_samples`` (``dict(gt_label=int)``), the layout ``ZooClassifier.forward`` takes."""

    def __init__(self, mean=(0.0,), std=(255.0,)):
        self.mean = np.asarray(mean, dtype=np.float32)
        self.std = np.asarray(std, dtype=np.float32)

    def __call__(self, results):
        img = results["img"]
        if img.shape[2] != self.mean.size and self.mean.size != 1:
            raise ValueError(f"image has {img.shape[2]} channels but mean/std have {self.mean.size}")
        x = (img.astype(np.float32) - self.mean) / self.std  # (H, W, C)
        inputs = torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))  # (C, H, W)
        return dict(inputs=inputs, data_samples=dict(gt_label=int(results["gt_label"]),
                                                     sample_idx=int(results.get("sample_idx", -1))))
