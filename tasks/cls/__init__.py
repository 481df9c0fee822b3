"""Image classification on mmengine: datasets (Fashion-MNIST IDX, ImageFolder), transforms, the model wrapper
around ``zoo.load(name, task='cls')`` and top-k accuracy. Importing registers them in mmengine's root registries."""
from .. import common  # noqa: F401  (CPU DDP wrapper, safe checkpoint loading, progress hook)
from .datasets import FashionMNIST, ImageFolder, read_idx
from .metrics import TopKAccuracy
from .model import MixupCutmix, ZooClassifier
from .transforms import (ClsLoadImage, ClsPad, ClsRandomCrop, ClsRandomResizedCrop,
                         ClsResize, PackClsInputs)

__all__ = ["ClsLoadImage", "ClsPad", "ClsRandomCrop", "ClsRandomResizedCrop",
           "ClsResize", "FashionMNIST", "ImageFolder", "MixupCutmix", "PackClsInputs", "TopKAccuracy", "ZooClassifier",
           "read_idx"]
