_base_ = [
    './_base_/models/upernet_zoo-vit-micro-p4_scenes.py', './_base_/datasets/fashion_scenes.py',
    './_base_/schedules/schedule_scenes_p4_12k.py'
]
model = dict(backbone=dict(name='ff_vit_micro',
                           # the token-mixing layers are shaped by the token count (49 -> 256): they start fresh
                           init_cfg=dict(type='Pretrained', checkpoint='ff_vit_micro.cls_fmnist',
                                         skip=['blocks.*.mixer.*'])),
             # fixed token count: infer with a sliding 64 window
             test_cfg=dict(mode='slide', crop_size=(64, 64), stride=(42, 42)))
