# Micro models on the 64x64 Fashion-MNIST scenes with the light head, scaled down as upernet_zoo-vit-micro_scenes.py:
# patch 8 (an 8x8 token grid, so the head fuses at 16x16), SegformerHead 64 channels (as the micro UPerHead), no
# stochastic depth, 11 classes.
_base_ = ['./segformerhead_zoo-vit.py']
model = dict(
    data_preprocessor=dict(size=(64, 64)),
    backbone=dict(name='sa_vit_micro', img_size=(64, 64), patch_size=8, drop_path_rate=0.0),
    decode_head=dict(channels=64, num_classes=11))
