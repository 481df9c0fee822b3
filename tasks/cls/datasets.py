"""Image classification datasets in their real on-disk formats: Fashion-MNIST (IDX, gzip) and ImageFolder.

Fashion-MNIST: Xiao, Rasul & Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine Learning
Algorithms" (2017). Files as shipped by the Debian package ``dataset-fashion-mnist``
(``/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``) and by the original
release. IDX (LeCun's MNIST format): a big-endian int32 magic ``0x0000TTDD`` (TT: element type, DD: number of
dimensions; 2051 = uint8 3-D images, 2049 = uint8 1-D labels), DD big-endian int32 sizes, then the row-major data.

ImageFolder: ``root/<class name>/<image>``, classes sorted by name (the ImageNet ``train``/``val`` layout).

Each sample goes through ``pipeline`` (transforms from ``tasks.cls.transforms``) as a dict
``{'img': HxWxC uint8 array or 'img_path', 'gt_label': int, 'sample_idx': int}``.
"""
import gzip
import os

import numpy as np
from mmengine.dataset import Compose
from mmengine.registry import DATASETS
from torch.utils.data import Dataset

# IDX element type byte -> numpy big-endian dtype.
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
IDX_IMAGES, IDX_LABELS = 2051, 2049  # uint8 3-D, uint8 1-D

FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")
FASHION_MNIST_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def read_idx(path, expected_magic=None):
    """Read an IDX file (gzip-compressed if its name ends in ``.gz``) into a numpy array.

    Args:
        path: The file.
        expected_magic: The magic number the file must carry (e.g. 2051 for images, 2049 for labels).

    Returns:
        An array of the dimensions and element type the header states (native byte order).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: Bad magic number, unknown element type, or a data size that does not match the header.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"IDX file {path} not found")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4:
        raise ValueError(f"{path}: {len(raw)} bytes is too short for an IDX header")
    magic = int.from_bytes(raw[:4], "big")
    if expected_magic is not None and magic != expected_magic:
        raise ValueError(f"{path}: IDX magic number {magic} (0x{magic:08x}), expected {expected_magic} "
                         f"(0x{expected_magic:08x}); is this the right file (images vs labels) and not corrupted?")
    if raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_TYPES:
        raise ValueError(f"{path}: not an IDX file (magic 0x{magic:08x}; element type byte 0x{raw[2]:02x})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    dtype = np.dtype(IDX_TYPES[raw[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(f"{path}: header says shape {shape} ({expected} data bytes) but the file holds "
                         f"{len(raw) - header} data bytes")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


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
        data_root: Folder with the four ``*-ubyte.gz`` files.
        split: ``train`` or ``test`` (the ``t10k`` files).
        pipeline, index_range, max_samples: See ``ClsDataset``.
    """

    classes = FASHION_MNIST_CLASSES

    def __init__(self, data_root="/usr/share/datasets/fashion-mnist", split="train", pipeline=(), index_range=None,
                 max_samples=None):
        if split not in FASHION_MNIST_FILES:
            raise ValueError(f"split must be one of {', '.join(FASHION_MNIST_FILES)}, got {split!r}")
        img_file, label_file = (os.path.join(data_root, f) for f in FASHION_MNIST_FILES[split])
        for f in (img_file, label_file):
            if not os.path.isfile(f):
                raise FileNotFoundError(f"Fashion-MNIST file {f} not found. Install the data with `apt-get install "
                                        f"dataset-fashion-mnist` (or `make data`), or set data_root.")
        self.images = read_idx(img_file, IDX_IMAGES)  # (N, 28, 28) uint8
        self.labels = read_idx(label_file, IDX_LABELS)  # (N,) uint8
        if self.images.ndim != 3 or len(self.images) != len(self.labels):
            raise ValueError(f"{img_file} holds {self.images.shape} images but {label_file} {self.labels.shape} "
                             f"labels; expected (N, H, W) and (N,)")
        if self.labels.size and self.labels.max() >= len(self.classes):
            raise ValueError(f"{label_file}: label {int(self.labels.max())} >= {len(self.classes)} classes")
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
