_base_ = [
    './_base_/models/upernet_zoo-vit-micro_scenes.py', './_base_/datasets/fashion_scenes.py',
    './_base_/schedules/schedule_scenes_6k.py'
]
model = dict(backbone=dict(name='effa_vit_micro'))
