"""Feature networks for FID / KID / IS, passed to the metric as a parameter.

Each network maps images in [-1, 1] (B, C, H, W) to ``(features (B, F), logits (B, K) or None)`` and has a
``name`` that the metric puts into its keys (``FID(fmnist-clf)``), so a score is never mistaken for one computed
with another network:

* ``fmnist-clf``: a small CNN classifier of Fashion-MNIST (32x32, padded) trained by ``tools/train_fid_net.py``;
  its weights (``weights/fmnist_clf.safetensors``, < 1 MB) ship with the project, so the metric works everywhere
  without a download. Features: the penultimate layer (128-d); logits: the 10 classes (gives an IS).
* ``inception-v3``: the FID Inception (``tasks.gen.inception``) with a weights file the user supplies
  (pytorch-fid's ``pt_inception-2015-12-05-6726825d.pth``); 2048-d pool3 features, 1008 logits.
"""
import hashlib
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from .inception import InceptionV3

WEIGHTS_DIR = os.path.join(os.path.dirname(__file__), "weights")
FMNIST_CLF_WEIGHTS = os.path.join(WEIGHTS_DIR, "fmnist_clf.safetensors")


def _conv_bn(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class FashionMNISTClassifier(nn.Module):
    """A 3-conv CNN for 1x32x32 Fashion-MNIST: [conv 32, pool, conv 64, pool, conv 128, pool] (3x3 conv-BN-ReLU)
    -> spatial mean -> fc 128 + ReLU (the features) -> dropout -> fc 10.

    Inputs in [-1, 1]; RGB inputs are averaged to grey and other sizes resized to 32x32, so the network can score
    any generator (a score on non-Fashion-MNIST images is still only a Fashion-MNIST-feature distance).
    """

    name = "fmnist-clf"
    feature_dim = 128

    def __init__(self, num_classes=10):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(1, 32), nn.MaxPool2d(2), _conv_bn(32, 64), nn.MaxPool2d(2),
                                  _conv_bn(64, 128), nn.MaxPool2d(2))
        self.fc1 = nn.Linear(128, self.feature_dim)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(self.feature_dim, num_classes)

    def forward(self, x):
        if x.shape[1] != 1:
            x = x.mean(dim=1, keepdim=True)
        if x.shape[-2:] != (32, 32):
            x = F.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False)
        feats = F.relu(self.fc1(self.body(x).mean(dim=(2, 3))))  # (B, 128), penultimate layer
        return feats, self.fc2(self.drop(feats))


def sha256_of(path):
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def load_fmnist_clf(weights=None):
    """The trained Fashion-MNIST classifier (eval mode) from ``weights`` (default: the committed file)."""
    from safetensors.torch import load_file
    path = weights or FMNIST_CLF_WEIGHTS
    if not os.path.exists(path):
        raise FileNotFoundError(f"fmnist-clf weights {path} not found; train them with "
                                f"`python tools/train_fid_net.py --out {path}`")
    net = FashionMNISTClassifier()
    net.load_state_dict(load_file(path))
    return net.eval().requires_grad_(False)


def build_feature_net(spec):
    """Build a feature network from ``spec``.

    Args:
        spec: ``'fmnist-clf'``, ``dict(type='fmnist-clf', weights=None)``,
            ``dict(type='inception-v3', weights='/path/pt_inception-2015-12-05-6726825d.pth')``, or an
            ``nn.Module`` already following the contract (``name`` attribute, returns (features, logits or None)).
    """
    if isinstance(spec, nn.Module):
        if not hasattr(spec, "name"):
            raise ValueError("a feature network module needs a `name` attribute (it names the metric keys)")
        return spec.eval().requires_grad_(False)
    spec = dict(type=spec) if isinstance(spec, str) else dict(spec)
    kind = spec.pop("type")
    if kind == "fmnist-clf":
        return load_fmnist_clf(spec.get("weights"))
    if kind in ("inception-v3", "inception"):
        weights = spec.pop("weights", None)
        if not weights or not os.path.exists(weights):
            raise FileNotFoundError(
                f"inception-v3 needs its weights file (got {weights!r}): download pytorch-fid's "
                f"pt_inception-2015-12-05-6726825d.pth on a machine with internet and pass its path as "
                f"feature_net=dict(type='inception-v3', weights=PATH); or use feature_net='fmnist-clf'")
        return InceptionV3(**spec).load_weights(weights).eval().requires_grad_(False)
    raise ValueError(f"unknown feature network {kind!r}; available: 'fmnist-clf', 'inception-v3'")
