"""Images -> model input, the way a checkpoint was evaluated (timm's ``resolve_data_config`` and eval transform).

    import zoo
    model = zoo.load("sa_vit_micro.cls_fmnist").eval()
    x = zoo.preprocess(images, model)   # PIL images, uint8 / float arrays or tensors -> normalised (N, C, H, W)
    probs = model(x).softmax(-1)

``resolve_data_config(model)`` says what ``preprocess`` does, from ``model.pretrained_cfg`` (or a tag, or a
``PretrainedCfg``), and from the model's own input size where it has no pretrained entry:

* **classifiers** (fixed input size): timm's eval transform. An image of another size has its shorter side resized
  to ``floor(size / crop_pct)`` (both sides to ``floor(h / crop_pct), floor(w / crop_pct)`` for a non-square input)
  and the centre ``size`` cropped; ``crop_pct`` and ``interpolation`` come from the entry (DeiT: 0.875, bicubic),
  else 1.0 (the zoo's own classifiers saw whole images) and bicubic. As in timm this applies to an image of the
  input size too (with crop_pct 0.875 a 224-pixel image is enlarged to 256 and its centre 224 kept); with
  crop_pct 1.0 such an image is left as it is.
* **segmentors** (any input size): mmseg's test ``Resize(scale=test_scale, keep_ratio=True)`` of the dataset the
  weights were evaluated on (ADE20K ``(2048, 512)``: the image is scaled by ``min(2048 / long side, 512 / short
  side)``, bilinear); without a dataset scale (or with ``resize=False``) the image keeps its size.
* then ``(x / 255 - mean) / std`` per channel, with the channels the model takes: a grey image is repeated to three
  channels, a colour one made grey by ITU-R 601-2 luma (``L = 0.299 R + 0.587 G + 0.114 B``, as PIL's ``"L"``), an
  alpha channel dropped.

Inputs follow torchvision's conventions: PIL images and numpy arrays are HWC (``(H, W)``, ``(H, W, C)``,
``(N, H, W, C)``; a 3-D array whose last axis is not 1-4 is a batch of grey images ``(N, H, W)``, the IDX
layout of Fashion-MNIST), tensors are CHW (``(H, W)``, ``(C, H, W)``, ``(N, C, H, W)``; a batch of grey tensors is
``(N, 1, H, W)``); a list holds single images. uint8 is 0..255; float must be 0..1.

For classifiers, PIL images and uint8 arrays are resized with PIL (what timm's transform does: the same values),
float arrays and tensors with ``F.interpolate`` (``antialias=True``, as torchvision's tensor ``Resize``; within about
1/255 per pixel of PIL); for segmentors every input, PIL images too, with plain bilinear ``F.interpolate``, as
mmcv's OpenCV resize, and an 8-bit input (PIL, uint8) rounded back to whole levels after it, as mmseg's pipeline keeps
the resized image uint8: within one level of ``mmcv.imrescale`` per pixel (OpenCV's fixed-point weights).
Only torch, numpy and (for PIL inputs) Pillow are used.
"""
import math

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["preprocess", "resolve_data_config"]

IMAGE_TASKS = ("cls", "seg")
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601-2, PIL's convert("L")


def _entry(model_or_cfg):
    """The pretrained entry as a plain dict (``{}`` when there is none) and the model (``None`` for an entry)."""
    if isinstance(model_or_cfg, dict):
        return dict(model_or_cfg), None
    if isinstance(model_or_cfg, torch.nn.Module):
        return dict(getattr(model_or_cfg, "pretrained_cfg", None) or {}), model_or_cfg
    if isinstance(model_or_cfg, str):
        from .registry import pretrained_cfg
        return pretrained_cfg(model_or_cfg).to_dict(), None
    from .pretrained import PretrainedCfg
    if isinstance(model_or_cfg, PretrainedCfg):
        return model_or_cfg.to_dict(), None
    raise TypeError(f"resolve_data_config takes a zoo model, a pretrained tag, a PretrainedCfg or its dict, got "
                    f"{type(model_or_cfg).__name__}")


def _model_input(model):
    """(task, (C, H, W)) of a zoo image model without a pretrained entry, read from its patch embedding."""
    task = (getattr(model, "zoo_config", None) or {}).get("task")
    trunk = model.backbone if hasattr(model, "backbone") else model  # a segmentor's backbone wraps the trunk,
    trunk = trunk.trunk if hasattr(trunk, "trunk") else trunk  # as zoo.features.FeatureExtractor does
    pe = getattr(trunk, "patch_embed", None)
    if pe is not None and hasattr(pe, "proj") and hasattr(pe, "img_size"):
        return task, (pe.proj.in_channels, *pe.img_size)
    args = (getattr(model, "zoo_config", None) or {}).get("args") or {}
    if "img_size" not in args:
        raise ValueError(f"cannot tell the input size of {type(model).__name__}; pass its pretrained tag or a dict "
                         f"with task, input_size, mean and std")
    size = args["img_size"]
    size = (size, size) if isinstance(size, int) else tuple(size)
    return task, (args.get("in_chans", 3), *size)


def resolve_data_config(model_or_cfg):
    """How ``preprocess`` prepares images for ``model_or_cfg`` (timm's ``resolve_data_config``).

    Args:
        model_or_cfg: A zoo model (its ``pretrained_cfg``, or its own input size and ImageNet statistics when it was
            not loaded with weights), a pretrained tag, a ``PretrainedCfg`` or its dict.

    Returns:
        A dict: ``task`` (``cls`` or ``seg``), ``input_size`` ``(C, H, W)`` (the size a classifier takes; a segmentor's
        crop), ``mean``, ``std`` (0..1 pixel units), ``interpolation``, ``crop_pct`` (classifiers), ``test_scale``
        (segmentors: mmseg's keep-ratio bound, or ``None``).
    """
    from .datasets import DATASETS, IMAGENET_MEAN, IMAGENET_STD
    entry, model = _entry(model_or_cfg)
    tag = entry.get("tag")
    task = entry.get("task")
    if task is None and tag:
        from .pretrained import parse_tag
        task = parse_tag(tag).task
    input_size = entry.get("input_size")
    if model is not None and (task is None or input_size is None):
        task_m, size_m = _model_input(model)
        task, input_size = task or task_m, input_size or size_m
    if task not in IMAGE_TASKS:
        raise ValueError(f"{tag or 'this model'} is a {task!r} model; preprocess prepares images for {IMAGE_TASKS} "
                         f"models only (point clouds: tasks.points, generators take noise)")
    if input_size is None:
        raise ValueError(f"{tag or 'this entry'} has no input_size; pass the model itself")
    extra = entry.get("extra") or {}
    channels = input_size[0]
    mean = tuple(entry.get("mean") or (IMAGENET_MEAN if channels == 3 else (0.5,) * channels))
    std = tuple(entry.get("std") or (IMAGENET_STD if channels == 3 else (0.5,) * channels))
    if len(mean) != channels or len(std) != channels:
        raise ValueError(f"{tag}: mean {mean} / std {std} do not have the model's {channels} channels")
    cfg = dict(task=task, input_size=tuple(input_size), mean=mean, std=std)
    if task == "cls":
        cfg.update(interpolation=extra.get("interpolation", "bicubic"), crop_pct=float(extra.get("crop_pct", 1.0)))
    else:
        test_scale = DATASETS.get(entry.get("dataset"), {}).get("test_scale")  # the seg configs' test Resize
        cfg.update(interpolation="bilinear", test_scale=test_scale)
    return cfg


def _is_data_config(d):
    """True for a dict ``resolve_data_config`` returned (not a ``pretrained_cfg``, which it resolves)."""
    return isinstance(d, dict) and {"task", "input_size", "mean", "std", "interpolation"} <= set(d) and \
        ("crop_pct" in d or "test_scale" in d)


def _pil_image_class():
    """``PIL.Image.Image``, or ``None`` without Pillow (then no input can be a PIL image)."""
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image.Image


def _is_pil(x):
    cls = _pil_image_class()
    return cls is not None and isinstance(x, cls)


def _to_batch(images):
    """``images`` as a list of (C, H, W) tensors, uint8 (0..255) or float in 0..1 (PIL images stay PIL, for PIL's
    resize); ``_as_float`` turns a uint8 one into 0..1."""
    if _is_pil(images):
        return [images]
    if isinstance(images, (list, tuple)):
        out = []
        for i, im in enumerate(images):
            one = _to_batch(im)
            if len(one) != 1:
                raise ValueError(f"item {i} of the list holds {len(one)} images; a list holds single images")
            out += one
        return out
    if isinstance(images, np.ndarray):
        arr = np.ascontiguousarray(images)
        t, hwc = torch.from_numpy(arr if arr.flags.writeable else arr.copy()), True  # PIL's arrays are read-only
    elif torch.is_tensor(images):
        t, hwc = images.detach().cpu(), False
    else:
        raise TypeError(f"preprocess takes PIL images, numpy arrays, tensors or a list of them, got "
                        f"{type(images).__name__}")
    if t.is_floating_point():
        t = t.float()
        if t.numel() and (float(t.min()) < 0 or float(t.max()) > 1):
            raise ValueError(f"float images must be in 0..1, got values in {float(t.min()):.4g}..{float(t.max()):.4g}"
                             f": divide 0..255 images by 255 (or pass them as uint8)")
    elif t.dtype != torch.uint8:
        raise ValueError(f"images of dtype {t.dtype} are not supported: pass uint8 (0..255) or float (0..1)")
    if t.dim() == 2:
        return [t[None]]
    if t.dim() == 3:
        if not hwc:  # torchvision's convention: a 3-D tensor is one (C, H, W) image
            if t.shape[0] not in (1, 2, 3, 4):
                raise ValueError(f"a 3-D tensor is one (C, H, W) image with 1 to 4 channels, got shape "
                                 f"{tuple(t.shape)}; pass a batch of grey images as (N, 1, H, W)")
            return [t]
        if t.shape[-1] in (1, 2, 3, 4):
            return [t.permute(2, 0, 1)]
        return list(t[:, None])  # (N, H, W) array: a batch of grey images (the IDX layout)
    if t.dim() == 4:
        return list(t.permute(0, 3, 1, 2) if hwc else t)
    raise ValueError(f"cannot read an image batch of shape {tuple(t.shape)}: (H, W), (H, W, C) / (C, H, W) or "
                     f"(N, H, W, C) / (N, C, H, W) expected")


def _as_float(img):
    """A (C, H, W) tensor from ``_to_batch`` as float32 in 0..1."""
    return img.float().div_(255) if img.dtype == torch.uint8 else img


def _uint8_arrays_as_pil(images):
    """``images`` with every uint8 numpy image or batch (HWC / IDX layouts) as PIL images; anything else as it is."""
    if isinstance(images, (list, tuple)):  # one image per item; an item holding a batch stays for _to_batch to refuse
        return [im if isinstance(one, list) else one for im, one in ((im, _uint8_arrays_as_pil(im)) for im in images)]
    if not (isinstance(images, np.ndarray) and images.dtype == np.uint8) or _pil_image_class() is None:
        return images
    from PIL import Image
    a = np.ascontiguousarray(images)
    if a.ndim == 2 or (a.ndim == 3 and a.shape[-1] in (1, 2, 3, 4)):
        return Image.fromarray(a[..., 0] if a.ndim == 3 and a.shape[-1] == 1 else a)
    if a.ndim in (3, 4):  # (N, H, W) or (N, H, W, C)
        return [_uint8_arrays_as_pil(x) for x in a]
    return images  # an unreadable shape: _to_batch names it


def _fit_channels(x, channels):
    c = x.shape[0]
    if c in (2, 4):  # grey + alpha, RGBA: drop alpha
        x, c = x[:c - 1], c - 1
    if c == channels:
        return x
    if c == 1 and channels == 3:
        return x.expand(3, -1, -1)
    if c == 3 and channels == 1:
        w = torch.tensor(LUMA, dtype=x.dtype).view(3, 1, 1)
        return (x * w).sum(dim=0, keepdim=True)
    raise ValueError(f"an image with {c} channels cannot be given to a model that takes {channels}")


def _cls_geometry(hw, size, crop_pct):
    """(resized (h, w), crop box (top, left, h, w)) of timm's eval transform for an image of size ``hw``."""
    H, W = hw
    th, tw = size
    if th == tw:  # Resize(int): the shorter side to floor(size / crop_pct), keeping the aspect ratio (torchvision)
        s = math.floor(th / crop_pct)
        short, long = (H, W) if H <= W else (W, H)
        new_long = int(s * long / short)
        rh, rw = (s, new_long) if H <= W else (new_long, s)
    else:
        rh, rw = math.floor(th / crop_pct), math.floor(tw / crop_pct)
    top, left = int(round((rh - th) / 2.0)), int(round((rw - tw) / 2.0))  # torchvision's center_crop
    return (rh, rw), (top, left, th, tw)


def _seg_size(hw, scale):
    """mmcv's ``rescale_size`` for ``Resize(scale, keep_ratio=True)``: the largest size within ``scale``."""
    H, W = hw
    long_bound, short_bound = max(scale), min(scale)
    f = min(long_bound / max(H, W), short_bound / min(H, W))
    return int(H * f + 0.5), int(W * f + 0.5)


def _resize(img, size, mode, antialias):
    """Resize one image (PIL, or a (C, H, W) tensor) to ``size`` (h, w) and return a (C, h, w) tensor."""
    if _is_pil(img):
        from PIL import Image
        resample = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR, "nearest": Image.NEAREST}[mode]
        if (img.height, img.width) != tuple(size):
            img = img.resize((size[1], size[0]), resample)
        return _as_float(_to_batch(np.asarray(img))[0])
    if tuple(img.shape[-2:]) == tuple(size):
        return img
    out = F.interpolate(img[None], size=size, mode=mode, align_corners=False if mode != "nearest" else None,
                        antialias=antialias)[0]
    return out.clamp_(0, 1)


def _pil_mode(img, channels):
    if img.mode in ("RGB", "L"):
        return img if (img.mode == "L") == (channels == 1) else img.convert("L" if channels == 1 else "RGB")
    return img.convert("L" if channels == 1 else "RGB")


def preprocess(images, model_or_cfg, resize=True):
    """Images -> the normalised (N, C, H, W) float32 batch ``model_or_cfg`` takes (``resolve_data_config``).

    Args:
        images: A PIL image, a numpy array or tensor of one image or a batch, or a list of single images
            (module docstring: layouts and value ranges).
        model_or_cfg: A zoo model, a pretrained tag, a ``PretrainedCfg`` or a ``resolve_data_config`` dict.
        resize: ``False`` keeps each image's size (a classifier then needs images of its input size).

    Raises:
        ValueError: An unreadable layout or range, a channel count the model cannot take, a classifier input of
            the wrong size with ``resize=False``, or segmentation images that end at different sizes (a batch needs
            one size: preprocess them one at a time).
    """
    cfg = model_or_cfg if _is_data_config(model_or_cfg) else resolve_data_config(model_or_cfg)
    channels, size = cfg["input_size"][0], tuple(cfg["input_size"][1:])
    out = []
    if cfg["task"] == "cls" and resize:  # uint8 arrays take PIL's path, as timm's transform would (exact)
        images = _uint8_arrays_as_pil(images)
    for img in _to_batch(images):
        if _is_pil(img):
            img = _pil_mode(img, channels)
            if cfg["task"] == "seg":  # OpenCV's bilinear, not PIL's (which averages over a wider window to shrink)
                img = _to_batch(np.asarray(img))[0]
        whole_levels = _is_pil(img) or img.dtype == torch.uint8
        if _is_pil(img):
            hw = (img.height, img.width)
        else:
            img = _fit_channels(_as_float(img), channels)
            hw = tuple(img.shape[-2:])
        if cfg["task"] == "cls":
            if not resize and hw != size:
                raise ValueError(f"the model takes {size[0]}x{size[1]} images, got {hw[0]}x{hw[1]}; resize them "
                                 f"or call preprocess with resize=True")
            if resize:  # always, as timm: a crop_pct < 1 resizes and crops an image of the input size too
                (rh, rw), (top, left, th, tw) = _cls_geometry(hw, size, cfg["crop_pct"])
                img = _resize(img, (rh, rw), cfg["interpolation"], antialias=True)[:, top:top + th, left:left + tw]
        elif resize and cfg.get("test_scale"):
            img = _resize(img, _seg_size(hw, cfg["test_scale"]), "bilinear", antialias=False)
            if whole_levels:  # mmseg's pipeline resizes uint8 images to uint8: round to whole levels as it does
                img = img.mul(255).round_().div_(255)
        if _is_pil(img):
            img = _as_float(_to_batch(np.asarray(img))[0])
        out.append(_fit_channels(img, channels))
    sizes = {tuple(x.shape[-2:]) for x in out}
    if len(sizes) > 1:
        raise ValueError(f"the images end at different sizes {sorted(sizes)}; a batch needs one: preprocess them one "
                         f"at a time (a segmentor takes any size)")
    x = torch.stack(out)
    mean = torch.tensor(cfg["mean"], dtype=x.dtype).view(1, -1, 1, 1)
    std = torch.tensor(cfg["std"], dtype=x.dtype).view(1, -1, 1, 1)
    return ((x - mean) / std).contiguous()
