"""Point-cloud classification (ModelNet40) and part segmentation (ShapeNetPart) on mmengine.

Importing this package registers, in mmengine's root registries: datasets ``ModelNet40H5``, ``ModelNet40Normal``,
``ShapeNetPart``; transforms ``PointSample``, ``PointDropout``, ``PointScaleShift``, ``PointShuffle``,
``PackPointInputs``; models ``ZooPointClassifier``, ``ZooPartSegmenter``; metrics ``PointClsMetric``,
``PartIoUMetric``.
"""
from . import datasets, metrics, models, transforms  # noqa: F401  (registration side effects)
