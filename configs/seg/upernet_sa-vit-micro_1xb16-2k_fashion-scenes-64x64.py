# The bundled checkpoint sa_vit_micro.seg_scenes: the micro scenes model (UPerNet 64/32 channels, patch 8) for
# 2,000 iterations on the Fashion-MNIST scenes (make scenes).
_base_ = [
    './_base_/models/upernet_zoo-vit-micro_scenes.py', './_base_/datasets/fashion_scenes.py',
    './_base_/schedules/schedule_scenes_2k.py'
]
model = dict(backbone=dict(name='sa_vit_micro'))
