# UPerNet over a zoo trunk: mmseg's DeiT + UPerNet recipe for ADE20K
# (mmseg configs/vit/vit_deit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py, _base_/models/upernet_vit-b16_ln_mln.py)
# with the token mixer swapped.
#
# The recipe has one source, zoo.heads.seg.model_cfg, which zoo.load(name, task='seg') builds from; this config
# reads it instead of spelling it out a second time, so training and zoo.load cannot drift apart. (The other way
# round, zoo reading this file, would not work from an installed package: configs/ is not shipped.) Channel widths
# come from the registry (ZooEncoderDecoder fills the neck and head in_channels from the backbone). The empty
# _base_ keeps this an ordinary mmengine config: a file that imports a module and has no _base_ is parsed as a
# lazy-import config, which the configs inheriting from this one are not.
#
# BN, not SyncBN: SyncBN does not run on CPU or a single process. For multi-GPU runs switch with
#   --cfg-options model.decode_head.norm_cfg.type=SyncBN model.auxiliary_head.norm_cfg.type=SyncBN
_base_ = []
from zoo.heads.seg import model_cfg  # noqa: E402

custom_imports = dict(imports=['tasks.seg'], allow_failed_imports=False)
# every config names its model (backbone.name); the ADE20K recipe: 512 crop, patch 16, stochastic depth 0.1
model = model_cfg('sa_vit_base', num_classes=150, img_size=512, patch_size=16, drop_path_rate=0.1)
model.backbone.checkpoint = None  # a classification checkpoint for the trunk (e.g. converted DeiT weights)
# Evaluation reads the labels only: predict skips the full-size logits (ZooEncoderDecoder.predict, same labels).
model.test_cfg.return_logits = False
# ff configs switch test_cfg to dict(mode='slide', crop_size=crop_size, stride=(341, 341)): fixed token count.
norm_cfg = model.decode_head.norm_cfg
data_preprocessor = model.data_preprocessor  # pads training batches to the crop
