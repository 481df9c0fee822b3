_base_ = [
    './_base_/models/upernet_zoo-vit-micro-p4_scenes.py', './_base_/datasets/fashion_scenes.py',
    './_base_/schedules/schedule_scenes_p4_12k.py'
]
model = dict(backbone=dict(name='ea_vit_micro',
                           init_cfg=dict(type='Pretrained', checkpoint='ea_vit_micro.cls_fmnist')))
