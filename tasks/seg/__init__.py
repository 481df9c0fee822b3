"""Semantic segmentation on mmsegmentation: registrations loaded by ``custom_imports`` in ``configs/seg/_base_``.

Importing this package registers, in mmseg's registries:

- models: ``ZooViTBackbone`` (any registered zoo trunk as an mmseg backbone) and ``ZooEncoderDecoder`` (UPerNet
  segmentor), both from ``zoo.heads.seg``;
- datasets: ``ZooADE20KDataset`` (ADE20K layout with folder/file checks) and ``FashionScenesDataset`` (the scenes
  written by ``tools/make_scenes.py``, same layout, background a real class);
- transforms: ``LoadCheckedAnnotations`` (mmseg's ``LoadAnnotations`` plus size and label-range checks that name
  the file);
- losses: ``NeighbourWeightedCrossEntropy`` (cross-entropy weighting the pixels where two items meet).
"""
from zoo.heads import seg as _seg  # noqa: F401  (registers the backbone adapter and segmentor)

from .datasets import FashionScenesDataset, ZooADE20KDataset
from .losses import NeighbourWeightedCrossEntropy
from .transforms import LoadCheckedAnnotations

__all__ = ["FashionScenesDataset", "LoadCheckedAnnotations", "NeighbourWeightedCrossEntropy", "ZooADE20KDataset"]
