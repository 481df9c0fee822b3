_base_ = [
    './_base_/models/segformerhead_zoo-vit.py', './_base_/datasets/ade20k.py',
    './_base_/schedules/schedule_160k.py'
]
model = dict(backbone=dict(name='ff_vit_base'),
             # fixed token count: train at the 512 crop, infer with a sliding 512 window
             test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
