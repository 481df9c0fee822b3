_base_ = [
    './_base_/models/upernet_zoo-vit-micro_scenes.py', './_base_/datasets/fashion_scenes.py',
    './_base_/schedules/schedule_scenes_6k.py'
]
model = dict(backbone=dict(name='ff_vit_micro'),
             # fixed token count: infer with a sliding 64 window
             test_cfg=dict(mode='slide', crop_size=(64, 64), stride=(42, 42)))
