_base_ = [
    './_base_/models/segformerhead_zoo-vit.py', './_base_/datasets/ade20k.py',
    './_base_/schedules/schedule_160k.py'
]
# starts from DeiT-B (ImageNet-1k), as mmseg's vit_deit recipe; downloaded and converted on first use
model = dict(backbone=dict(name='sa_vit_base',
                           init_cfg=dict(type='Pretrained', checkpoint='sa_vit_base.cls_in1k')))
# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
