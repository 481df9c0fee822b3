"""Image datasets for GAN training and evaluation, read from the benchmarks' own file formats.

* CIFAR-10 python batches (``cifar-10-batches-py/data_batch_{1..5}``, ``test_batch``): pickles written by Python 2,
  read with ``encoding='latin1'``; keys may be ``'data'`` or ``b'data'`` (normalised here). ``data`` is
  (10000, 3072) uint8, channel-major (R plane, G plane, B plane of 32x32).
* Fashion-MNIST IDX files (``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]``, e.g. the Debian package
  ``dataset-fashion-mnist`` at ``/usr/share/datasets/fashion-mnist``): 28x28 grey images, zero-padded to 32x32 so
  the GAN's power-of-two layout applies. Read by ``zoo.datasets.read_fashion_mnist``, the zoo's one IDX reader.

Each item is ``dict(inputs=uint8 tensor (C, H, W), label=int, index=int)``; the model maps inputs to [-1, 1].
"""
import os
import pickle

import numpy as np
import torch
from mmengine.registry import DATASETS
from torch.utils.data import Dataset

from zoo.datasets import CIFAR10_CLASSES, FASHION_MNIST_CLASSES, read_fashion_mnist
from zoo.datasets import FASHION_MNIST_ROOT as FMNIST_ROOT


class _ArrayDataset(Dataset):
    """Images (N, C, H, W) uint8 and labels (N,) held in memory; ``max_samples`` keeps the first n."""

    def __init__(self, images, labels, max_samples=None, split=None):
        if max_samples is not None and max_samples < len(images):
            images, labels = images[:max_samples], labels[:max_samples]
            split = f"{split}-first{max_samples}" if split else None
        self.images = torch.from_numpy(np.ascontiguousarray(images))
        self.labels = torch.from_numpy(np.asarray(labels, dtype=np.int64))
        # ``split`` names the images in the file names of cached reference features (GenMetric)
        self.metainfo = dict(classes=getattr(self, "CLASSES", None), split=split)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return dict(inputs=self.images[i], label=int(self.labels[i]), index=i)


def _read_cifar_batch(path):
    with open(path, "rb") as f:
        d = pickle.load(f, encoding="latin1")
    d = {(k.decode("latin1") if isinstance(k, bytes) else k): v for k, v in d.items()}  # b'data' -> 'data'
    if "data" not in d or "labels" not in d:
        raise KeyError(f"{path}: not a CIFAR-10 python batch (keys: {sorted(d)}; expected 'data' and 'labels')")
    data = np.asarray(d["data"], dtype=np.uint8).reshape(-1, 3, 32, 32)  # (N, 3072) -> (N, C, H, W)
    return data, np.asarray(d["labels"], dtype=np.int64)


@DATASETS.register_module()
class CIFAR10Batches(_ArrayDataset):
    """CIFAR-10 from the python batches.

    Args:
        data_root: ``cifar-10-batches-py`` itself or a folder holding it.
        split: ``train`` (data_batch_1..5, 50k) or ``test`` (test_batch, 10k).
        max_samples: Keep only the first n images (e.g. a cheaper FID reference).
    """

    CLASSES = CIFAR10_CLASSES

    def __init__(self, data_root, split="train", max_samples=None):
        root = data_root
        if not os.path.exists(os.path.join(root, "test_batch")):
            root = os.path.join(data_root, "cifar-10-batches-py")
        names = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
        if split not in ("train", "test"):
            raise ValueError(f"CIFAR10Batches: split must be 'train' or 'test', got {split!r}")
        missing = [n for n in names if not os.path.exists(os.path.join(root, n))]
        if missing:
            raise FileNotFoundError(f"CIFAR10Batches: {', '.join(missing)} not found under {root}; point data_root "
                                    f"at the extracted cifar-10-python.tar.gz (the folder cifar-10-batches-py)")
        parts = [_read_cifar_batch(os.path.join(root, n)) for n in names]
        super().__init__(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), max_samples,
                         split=f"cifar10-{split}")


@DATASETS.register_module()
class FashionMNIST32(_ArrayDataset):
    """Fashion-MNIST, zero-padded from 28x28 to ``img_size`` (32) with one channel.

    Args:
        data_root: Folder of the IDX files (gzipped or not).
        split: ``train`` (60k) or ``test`` (10k, the ``t10k`` files).
        img_size: Padded side (>= 28).
        max_samples: Keep only the first n images.
    """

    CLASSES = FASHION_MNIST_CLASSES

    def __init__(self, data_root=FMNIST_ROOT, split="train", img_size=32, max_samples=None):
        if split not in ("train", "test"):
            raise ValueError(f"FashionMNIST32: split must be 'train' or 'test', got {split!r}")
        prefix = "train" if split == "train" else "t10k"
        images, labels = read_fashion_mnist(data_root, split)
        if img_size < 28:
            raise ValueError(f"FashionMNIST32: img_size must be >= 28, got {img_size}")
        lo = (img_size - 28) // 2
        padded = np.zeros((len(images), 1, img_size, img_size), dtype=np.uint8)
        padded[:, 0, lo:lo + 28, lo:lo + 28] = images
        super().__init__(padded, labels, max_samples, split=f"fashion-mnist-{prefix}")
