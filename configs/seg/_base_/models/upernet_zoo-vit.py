# UPerNet over a zoo trunk: mmseg's DeiT + UPerNet recipe for ADE20K
# (mmseg configs/vit/vit_deit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py, _base_/models/upernet_vit-b16_ln_mln.py)
# with the token mixer swapped. Channel widths come from the registry (ZooEncoderDecoder fills the neck and head
# in_channels from the backbone), so no architecture number is repeated here.
#
# BN, not SyncBN: SyncBN does not run on CPU or a single process. For multi-GPU runs switch with
#   --cfg-options model.decode_head.norm_cfg.type=SyncBN model.auxiliary_head.norm_cfg.type=SyncBN
custom_imports = dict(imports=['tasks.seg'], allow_failed_imports=False)
norm_cfg = dict(type='BN', requires_grad=True)
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255,
    size=(512, 512))  # pads training batches to the crop
model = dict(
    type='ZooEncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='ZooViTBackbone',
        name='sa_vit_base',  # every config names its model
        img_size=(512, 512),  # the training crop
        patch_size=16,
        drop_path_rate=0.1,
        checkpoint=None),  # a classification checkpoint for the trunk (e.g. converted DeiT weights)
    neck=dict(type='MultiLevelNeck', scales=[4, 2, 1, 0.5]),
    decode_head=dict(
        type='UPerHead',
        in_index=[0, 1, 2, 3],
        pool_scales=(1, 2, 3, 6),
        channels=512,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    auxiliary_head=dict(
        type='FCNHead',
        in_index=3,
        channels=256,
        num_convs=1,
        concat_input=False,
        dropout_ratio=0.1,
        num_classes=150,
        norm_cfg=norm_cfg,
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=0.4)),
    train_cfg=dict(),
    # ff configs switch to dict(mode='slide', crop_size=crop_size, stride=(341, 341)): fixed token count.
    test_cfg=dict(mode='whole'))
