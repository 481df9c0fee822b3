"""Image generation task: datasets, the mmengine GAN model, optimiser constructor and FID/KID/IS metric.

Importing this package registers everything in mmengine's root registries (``custom_imports`` in the configs).
"""
from .datasets import CIFAR10Batches, FashionMNIST32
from .hooks import TrainTimeBudgetHook
from .feature_nets import FashionMNISTClassifier, build_feature_net
from .metrics import GenMetric, fid_from_features, frechet_distance, inception_score, kernel_inception_distance
from .model import GANDataPreprocessor, GANModel, GANOptimWrapperConstructor, GANSeparateDistributedDataParallel

__all__ = ["CIFAR10Batches", "FashionMNIST32", "FashionMNISTClassifier", "build_feature_net", "GenMetric",
           "fid_from_features", "frechet_distance", "inception_score", "kernel_inception_distance",
           "GANDataPreprocessor", "GANModel", "GANOptimWrapperConstructor", "TrainTimeBudgetHook"]
