# The light decode head over a zoo trunk: the UPerNet recipe's data preprocessor, backbone and test mode
# (upernet_zoo-vit.py) with its neck and heads replaced by
#   - mmseg's Feature2Pyramid (the BEiT/ViTDet simple pyramid): the 4 trunk maps at stride 16 become strides
#     8 (one 2x2 transposed conv), 16, 32 and 64 (max-pools). No 3x3 convs, unlike MultiLevelNeck.
#   - mmseg's SegformerHead (Xie et al., SegFormer, https://arxiv.org/abs/2105.15203): a 1x1 conv per level to 128
#     channels, all resized to stride 8, concatenated and fused by one 1x1 conv; no auxiliary head.
# Why this one: the neck + head alone on a 1024x1024 image (*_vit_tiny width 192) measured by
# `tools/benchmark.py --only seg-heads` (table and machine in docs/BENCHMARKS.md): UPerNet's costs 10-20x the trunk,
# this one a small fraction of it, so the mixer decides the model's time.
#
# Like upernet_zoo-vit.py, the recipe has one source, zoo.heads.seg.model_cfg (decode_head='segformer'), which
# zoo.load(name, task='seg', decode_head='segformer') builds from.
_base_ = []
from zoo.heads.seg import model_cfg  # noqa: E402

custom_imports = dict(imports=['tasks.seg'], allow_failed_imports=False)
# every config names its model (backbone.name); the ADE20K recipe: 512 crop, patch 16, stochastic depth 0.1
model = model_cfg('sa_vit_base', num_classes=150, img_size=512, patch_size=16, drop_path_rate=0.1,
                  decode_head='segformer')
model.backbone.checkpoint = None  # a classification checkpoint for the trunk (e.g. converted DeiT weights)
# Evaluation reads the labels only: predict skips the full-size logits (ZooEncoderDecoder.predict, same labels).
model.test_cfg.return_logits = False
# ff configs switch test_cfg to dict(mode='slide', crop_size=crop_size, stride=(341, 341)): fixed token count.
norm_cfg = model.decode_head.norm_cfg
data_preprocessor = model.data_preprocessor  # pads training batches to the crop
