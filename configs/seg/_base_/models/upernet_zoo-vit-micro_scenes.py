# Micro models on the 64x64 Fashion-MNIST scenes: the UPerNet recipe scaled down for a 2-core CPU.
# Shrunk against the ADE20K configs (and why): patch 8 instead of 16 (64-pixel scenes give an 8x8 token grid),
# UPerHead 64 channels instead of 512 and FCN 32 instead of 256 (CPU time; 16/8 starved sa and effa: mIoU 10-12
# instead of 28, docs/segmentation.md), no stochastic depth (short runs),
# 11 classes (background + 10 Fashion-MNIST classes).
_base_ = ['./upernet_zoo-vit.py']
model = dict(
    data_preprocessor=dict(size=(64, 64)),
    backbone=dict(name='sa_vit_micro', img_size=(64, 64), patch_size=8, drop_path_rate=0.0),
    decode_head=dict(channels=64, num_classes=11),
    auxiliary_head=dict(channels=32, num_classes=11))
