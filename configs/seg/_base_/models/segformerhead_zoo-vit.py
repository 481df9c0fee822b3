# The light decode head over a zoo trunk: the UPerNet recipe (upernet_zoo-vit.py: data preprocessor, backbone,
# test mode) with its neck and heads replaced by
#   - mmseg's Feature2Pyramid (the BEiT/ViTDet simple pyramid): the 4 trunk maps at stride 16 become strides
#     8 (one 2x2 transposed conv), 16, 32 and 64 (max-pools). No 3x3 convs, unlike MultiLevelNeck.
#   - mmseg's SegformerHead (Xie et al., SegFormer, https://arxiv.org/abs/2105.15203): a 1x1 conv per level to 128
#     channels, all resized to stride 8, concatenated and fused by one 1x1 conv; no auxiliary head.
# Why this one: measured head time (neck + head, one 1024x1024 image, *_vit_tiny width 192, 1 thread; the command and
# table in docs/BENCHMARKS.md, "Choosing the light head"): UPerNet 512 ch 50.7 s, MultiLevelNeck + SegformerHead 128
# 3.1 s, Feature2Pyramid(4..0.5) + SegformerHead 128 2.2 s, Feature2Pyramid(2..0.25) + SegformerHead 128 0.50 s,
# + FPNHead 128 0.61 s. The trunk itself takes 2.4-9.5 s there, so the mixer decides the model's time.
# zoo.load(name, task='seg', decode_head='segformer') builds the same model (zoo/heads/seg.py).
_base_ = ['./upernet_zoo-vit.py']
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    neck=dict(_delete_=True, type='Feature2Pyramid', rescales=[2, 1, 0.5, 0.25], norm_cfg=norm_cfg),
    decode_head=dict(
        _delete_=True,
        type='SegformerHead',
        in_index=[0, 1, 2, 3],
        channels=128,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=None)
