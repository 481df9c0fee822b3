_base_ = [
    './_base_/models/segformerhead_zoo-vit.py', './_base_/datasets/ade20k.py',
    './_base_/schedules/schedule_160k.py'
]
model = dict(backbone=dict(name='effa_vit_base'))
# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
