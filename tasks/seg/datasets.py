"""Datasets in the ADE20K layout: ``images/{training,validation}/*.jpg`` and ``annotations/.../*.png``.

``ZooADE20KDataset`` is mmseg's ``ADE20KDataset`` (150 classes, ``reduce_zero_label``: raw 0 -> 255 ignored, k -> k-1)
and ``FashionScenesDataset`` holds the Fashion-MNIST scenes of ``tools/make_scenes.py`` (11 classes: 0 = background,
k + 1 = Fashion-MNIST class k; background is a real, scored class, so no ``reduce_zero_label``). Both refuse, at
construction and naming the path, a missing image or annotation folder and an image without its label map.
"""
import os
import os.path as osp

from mmseg.datasets import ADE20KDataset, BaseSegDataset
from mmseg.registry import DATASETS

from zoo.datasets import SCENES_CLASSES


class _CheckedFolders:
    """Mixin: check the folders and that every image has its annotation before listing the data."""

    def load_data_list(self):
        img_dir = self.data_prefix.get("img_path")
        ann_dir = self.data_prefix.get("seg_map_path")
        if self.ann_file and osp.isfile(self.ann_file):
            return super().load_data_list()  # split file given: mmseg's listing
        if not img_dir or not osp.isdir(img_dir):
            raise FileNotFoundError(f"image folder not found: {img_dir} (expected the ADE20K layout "
                                    f"<data_root>/images/{{training,validation}}/*{self.img_suffix})")
        if not ann_dir or not osp.isdir(ann_dir):
            raise FileNotFoundError(
                f"annotation folder not found: {ann_dir} (images are in {img_dir}; the ADE20K layout needs "
                f"<data_root>/annotations/{{training,validation}}/*{self.seg_map_suffix}, one label map per image)")
        data_list = super().load_data_list()
        if not data_list:
            raise FileNotFoundError(f"no *{self.img_suffix} images in {img_dir}")
        have = set()
        for root, _, files in os.walk(ann_dir):
            have.update(osp.join(root, f) for f in files)
        missing = [d for d in data_list if d["seg_map_path"] not in have]
        if missing:
            first = missing[0]
            raise FileNotFoundError(f"{len(missing)} image(s) in {img_dir} have no label map in {ann_dir}, e.g. "
                                    f"{first['img_path']} -> missing {first['seg_map_path']}")
        return data_list


@DATASETS.register_module()
class ZooADE20KDataset(_CheckedFolders, ADE20KDataset):
    """ADE20K (``ADEChallengeData2016``) with folder checks; see the module docstring."""


@DATASETS.register_module()
class FashionScenesDataset(_CheckedFolders, BaseSegDataset):
    """Scenes of Fashion-MNIST items (``tools/make_scenes.py``) in the ADE20K layout; 11 classes incl. background."""

    METAINFO = dict(
        classes=SCENES_CLASSES,  # background + the Fashion-MNIST classes (zoo.datasets)
        palette=[[0, 0, 0], [230, 25, 75], [60, 180, 75], [255, 225, 25], [0, 130, 200], [245, 130, 48],
                 [145, 30, 180], [70, 240, 240], [240, 50, 230], [210, 245, 60], [250, 190, 212]])

    def __init__(self, img_suffix=".jpg", seg_map_suffix=".png", reduce_zero_label=False, **kwargs):
        super().__init__(img_suffix=img_suffix, seg_map_suffix=seg_map_suffix, reduce_zero_label=reduce_zero_label,
                         **kwargs)
