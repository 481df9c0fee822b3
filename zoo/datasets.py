"""What the zoo knows about its datasets, in one place: names, class names, normalisation, licence, sources.

The model cards (``zoo.cards``), the pretrained index (``zoo.pretrained``), the data loaders (``tasks.*.datasets``)
and the data tools (``tools/make_scenes.py``) read these records instead of keeping their own copies; a test checks
that the mmengine configs, which cannot import the zoo (mmengine would read them as lazy-import configs), state
the same mean/std. The module also holds the one reader of the IDX files Fashion-MNIST ships in.

It imports numpy and the standard library only, so ``import zoo`` stays light (no mmengine, no torch here).

``DATASETS`` maps a dataset key (the part after ``{task}_`` in a pretrained tag, e.g. ``fmnist`` in
``ff_vit_micro.cls_fmnist``) to a dict with:

* ``name``: display name; ``id``: Hub dataset id or ``None``; ``license``: a Hub licence id; ``url``: the source;
  ``split``: the split the cards' metrics are measured on; ``description``: one sentence for a card.
* ``classes`` (optional): class names in label order, when the dataset fixes them.
* ``mean``, ``std`` (optional): per-channel input normalisation on 0..1 pixels (multiply by 255 for the configs).
* ``test_scale`` (optional, segmentation sets): mmseg's test-time ``Resize(scale, keep_ratio=True)`` of the seg
  configs, ``(long side bound, short side bound)``; ``zoo.preprocess`` resizes with it.
"""
import gzip
import os

import numpy as np

FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist"  # where the Debian package dataset-fashion-mnist installs
FASHION_MNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                         "Ankle boot")
# The Fashion-MNIST scenes of tools/make_scenes.py: label 0 is the background, k + 1 is Fashion-MNIST class k.
SCENES_CLASSES = ("background",) + FASHION_MNIST_CLASSES
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

# ShapeNetPart: the 16 categories and their global part ids (0..49), the table every part-segmentation paper uses.
SHAPENET_PARTS = {
    "Airplane": [0, 1, 2, 3], "Bag": [4, 5], "Cap": [6, 7], "Car": [8, 9, 10, 11], "Chair": [12, 13, 14, 15],
    "Earphone": [16, 17, 18], "Guitar": [19, 20, 21], "Knife": [22, 23], "Lamp": [24, 25, 26, 27],
    "Laptop": [28, 29], "Motorbike": [30, 31, 32, 33, 34, 35], "Mug": [36, 37], "Pistol": [38, 39, 40],
    "Rocket": [41, 42, 43], "Skateboard": [44, 45, 46], "Table": [47, 48, 49],
}
SHAPENET_CATEGORIES = tuple(sorted(SHAPENET_PARTS))  # category index = position in this sorted tuple

# ImageNet statistics (0..1 pixels): the ImageNet-pretrained recipes and the segmentation scenes use them.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

DATASETS = {
    "fmnist": dict(
        name="Fashion-MNIST", id="zalando-datasets/fashion_mnist", license="mit", split="test",
        url="https://github.com/zalandoresearch/fashion-mnist",
        description="70,000 grayscale 28x28 images of 10 clothing classes (60,000 train, 10,000 test) by Zalando "
                    "Research, read from the IDX files of the Debian package dataset-fashion-mnist",
        classes=FASHION_MNIST_CLASSES,
        mean=(72.94 / 255,), std=(90.02 / 255,)),  # of the 60,000 training images
    "scenes": dict(
        name="Fashion-MNIST scenes", id=None, license="mit", split="validation",
        url="https://github.com/zalandoresearch/fashion-mnist",
        description="64x64 scenes composed by tools/make_scenes.py (seed 0) from Fashion-MNIST items on textured "
                    "backgrounds, ADE20K layout: 10,000 training scenes from the train images, 500 validation scenes "
                    "from the t10k images, 11 classes (background + the 10 Fashion-MNIST classes)",
        classes=SCENES_CLASSES, mean=IMAGENET_MEAN, std=IMAGENET_STD, test_scale=(256, 64)),
    "shapes": dict(
        name="Generated part-labelled shapes", id=None, license="apache-2.0", split="test",
        url=None,
        description="procedural point clouds of 12 ShapeNetPart categories with part labels, by tools/make_shapes.py "
                    "(seed 0), written in the ModelNet40 HDF5 and ShapeNetPart layouts: 80 train and 20 test shapes "
                    "per category, 2048 points each"),
    "in1k": dict(name="ImageNet-1k", id="ILSVRC/imagenet-1k", license="other", split="validation",
                 url="https://www.image-net.org/", description="ILSVRC-2012: 1.28M training images of 1000 classes",
                 mean=IMAGENET_MEAN, std=IMAGENET_STD),
    "ade20k": dict(name="ADE20K", id="zhoubolei/scene_parse_150", license="bsd-3-clause", split="validation",
                   url="https://groups.csail.mit.edu/vision/datasets/ADE20K/",
                   description="SceneParsing benchmark: 20,210 training and 2,000 validation images, 150 classes",
                   mean=IMAGENET_MEAN, std=IMAGENET_STD, test_scale=(2048, 512)),
    "cifar10": dict(name="CIFAR-10", id="uoft-cs/cifar10", license="unknown", split="test",
                    url="https://www.cs.toronto.edu/~kriz/cifar.html",
                    description="60,000 32x32 colour images of 10 classes (50,000 train, 10,000 test)",
                    classes=CIFAR10_CLASSES),
    "modelnet40": dict(name="ModelNet40", id=None, license="unknown", split="test",
                       url="https://modelnet.cs.princeton.edu/",
                       description="12,311 CAD models of 40 categories (9,843 train, 2,468 test), sampled to points"),
    "shapenetpart": dict(name="ShapeNetPart", id=None, license="unknown", split="test",
                         url="https://cs.stanford.edu/~ericyi/project_page/part_annotation/",
                         description="16,881 shapes of 16 categories annotated with 50 parts"),
}


# -- IDX (the MNIST file format) --------------------------------------------------------------------------------
# IDX (LeCun's MNIST format): a big-endian int32 magic ``0x0000TTDD`` (TT: element type, DD: number of dimensions;
# 2051 = uint8 3-D images, 2049 = uint8 1-D labels), DD big-endian int32 sizes, then the row-major data.
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
IDX_IMAGES, IDX_LABELS = 2051, 2049  # uint8 3-D, uint8 1-D
FASHION_MNIST_PREFIX = {"train": "train", "test": "t10k"}


def read_idx(path, expected_magic=None):
    """Read an IDX file (gzip-compressed if its name ends in ``.gz``) into a numpy array.

    Args:
        path: The file.
        expected_magic: The magic number the file must carry (e.g. 2051 for images, 2049 for labels).

    Returns:
        An array of the dimensions and element type the header states (native byte order).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: Bad magic number, unknown element type, or a data size that does not match the header (a
            truncated file); the message names the file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"IDX file {path} not found")
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # a truncated or corrupt gzip stream
        raise ValueError(f"{path}: cannot read the IDX data ({type(e).__name__}: {e})") from None
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
    if len(raw) < header:
        raise ValueError(f"{path}: {len(raw)} bytes is too short for an IDX header of {ndim} dimensions")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">i4", count=ndim, offset=4))
    dtype = np.dtype(IDX_TYPES[raw[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(f"{path}: header says shape {shape} ({expected} data bytes) but the file holds "
                         f"{len(raw) - header} data bytes")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def find_idx(root, stem):
    """The path of IDX file ``stem`` in ``root``: ``stem.gz`` (as Debian ships it), else the uncompressed ``stem``."""
    for name in (stem + ".gz", stem):
        path = os.path.join(root, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"Fashion-MNIST file {os.path.join(root, stem)}.gz (or uncompressed) not found. Install "
                            f"the data with `apt-get install dataset-fashion-mnist` (it installs "
                            f"{FASHION_MNIST_ROOT}; or `make data`), or set data_root.")


def read_fashion_mnist(root, split):
    """Fashion-MNIST ``split`` (``train``, or ``test`` = the ``t10k`` files) from IDX files, gzipped or not.

    Returns:
        ``(images, labels)``: (N, 28, 28) uint8 and (N,) uint8; errors name the file (missing, bad magic,
        truncated, a label outside the 10 classes, images and labels of different lengths).
    """
    if split not in FASHION_MNIST_PREFIX:
        raise ValueError(f"Fashion-MNIST split must be 'train' or 'test', got {split!r}")
    prefix = FASHION_MNIST_PREFIX[split]
    img_file = find_idx(root, f"{prefix}-images-idx3-ubyte")
    label_file = find_idx(root, f"{prefix}-labels-idx1-ubyte")
    images, labels = read_idx(img_file, IDX_IMAGES), read_idx(label_file, IDX_LABELS)
    if images.ndim != 3 or len(images) != len(labels):
        raise ValueError(f"{img_file} holds {images.shape} images but {label_file} {labels.shape} labels; "
                         f"expected (N, H, W) and (N,)")
    if labels.size and labels.max() >= len(FASHION_MNIST_CLASSES):
        raise ValueError(f"{label_file}: label {int(labels.max())} >= {len(FASHION_MNIST_CLASSES)} classes")
    return images, labels
