"""Image classification datasets in their real on-disk formats: Fashion-MNIST (IDX, gzip) and ImageFolder.

Fashion-MNIST: Xiao, Rasul & Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning
Algorithms" (2017), in the IDX files shipped by the Debian package ``dataset-fashion-mnist``
(``/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``) and by the original
release; read by ``zoo.datasets.read_fashion_mnist`` (the zoo's one IDX reader), class names from ``zoo.datasets``.

ImageFolder: ``root/<class name>/<image>``, classes sorted by name (the ImageNet ``train``/``val`` layout).

Each sample goes through ``pipeline`` (transforms from ``tasks.cls.transforms``) as a dict
``{'img': HxWxC uint8 array or 'img_path', 'gt_label': int, 'sample_idx': int}``.
"""
import os

from mmengine.dataset import Compose
from mmengine.registry import DATASETS
from torch.utils.data import Dataset

from zoo.datasets import FASHION_MNIST_CLASSES, FASHION_MNIST_ROOT, read_fashion_mnist, read_idx  # noqa: F401

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class ClsDataset(Dataset):
    """Base of the classification datasets: ``metainfo``, an optional index range, the transform pipeline.

    Args:
        pipeline: Transform configs or callables applied to each sample dict.
        index_range: ``(start, stop)`` to use a contiguous slice of the samples (e.g. a held-out split).
        max_samples: Keep at most this many samples (after ``index_range``); handy for quick runs.
    """

    def __init__(self, pipeline=(), index_range=None, max_samples=None):
        self.pipeline = Compose(list(pipeline))
        n = self._num_all()
        start, stop = index_range if index_range is not None else (0, n)
        if not 0 <= start <= stop <= n:
            raise ValueError(f"index_range {index_range} is outside the {n} samples of {type(self).__name__}")
        if max_samples is not None:
            stop = min(stop, start + int(max_samples))
        self._start, self._len = start, stop - start

    @property
    def metainfo(self):
        """``dict(classes=...)``; the Runner hands it to metrics as ``dataset_meta``."""
        return dict(classes=tuple(self.classes))

    def __len__(self):
        return self._len

    def __getitem__(self, idx):
        if not -self._len <= idx < self._len:
            raise IndexError(f"index {idx} out of range for {self._len} samples")
        i = self._start + idx % self._len
        return self.pipeline(self._sample(i))

    def _num_all(self):
        raise NotImplementedError

    def _sample(self, i):
        raise NotImplementedError


@DATASETS.register_module()
class FashionMNIST(ClsDataset):
    """Fashion-MNIST from its IDX ``.gz`` files (60,000 train / 10,000 test images, 28x28 grey, 10 classes).

    Args:
        data_root: Folder with the four ``*-ubyte.gz`` files (or uncompressed ``*-ubyte``).
        split: ``train`` or ``test`` (the ``t10k`` files).
        pipeline, index_range, max_samples: See ``ClsDataset``.
    """

    classes = FASHION_MNIST_CLASSES

    def __init__(self, data_root=FASHION_MNIST_ROOT, split="train", pipeline=(), index_range=None,
                 max_samples=None):
        self.images, self.labels = read_fashion_mnist(data_root, split)  # (N, 28, 28) and (N,) uint8
        self.data_root, self.split = data_root, split
        super().__init__(pipeline, index_range, max_samples)

    def _num_all(self):
        return len(self.labels)

    def _sample(self, i):
        return dict(img=self.images[i][:, :, None], gt_label=int(self.labels[i]), sample_idx=i)  # HxWx1


@DATASETS.register_module()
class ImageFolder(ClsDataset):
    """Images in ``data_root/<class>/<file>``; class indices follow the sorted folder names.

    Args:
        data_root: The split's folder (e.g. ``data/imagenet/train``).
        classes: Class folder names in index order (default: every sub-folder, sorted).
        extensions: File endings counted as images (case-insensitive).
        pipeline, index_range, max_samples: See ``ClsDataset``; the pipeline must start with ``ClsLoadImage``.
    """

    def __init__(self, data_root, classes=None, extensions=IMG_EXTENSIONS, pipeline=(), index_range=None,
                 max_samples=None):
        if not os.path.isdir(data_root):
            raise FileNotFoundError(f"ImageFolder root {data_root} not found (expected {data_root}/<class>/<image>)")
        found = sorted(d.name for d in os.scandir(data_root) if d.is_dir())
        if classes is None:
            classes = found
        else:
            missing = [c for c in classes if c not in found]
            if missing:
                raise FileNotFoundError(f"class folders {missing[:5]} not found under {data_root}")
        exts = tuple(e.lower() for e in extensions)
        self.samples = []  # (path, label)
        for label, name in enumerate(classes):
            for root, _, files in sorted(os.walk(os.path.join(data_root, name), followlinks=True)):
                self.samples += [(os.path.join(root, f), label) for f in sorted(files) if f.lower().endswith(exts)]
        if not self.samples:
            raise FileNotFoundError(f"no images ({', '.join(exts)}) under {data_root}/<class>/; found class folders: "
                                    f"{found[:10] or 'none'}")
        self.classes, self.data_root = tuple(classes), data_root
        super().__init__(pipeline, index_range, max_samples)

    def _num_all(self):
        return len(self.samples)

    def _sample(self, i):
        path, label = self.samples[i]
        return dict(img_path=path, gt_label=label, sample_idx=i)
