_base_ = [
    './_base_/models/segformerhead_zoo-vit.py', './_base_/datasets/ade20k.py',
    './_base_/schedules/schedule_160k.py'
]
# starts from the FF-only ImageNet-1k model except its token-mixing layers, which are shaped by the 196 tokens
# of a 224 input and keep their fresh initialisation at the 512 crop (1024 tokens)
model = dict(backbone=dict(name='ff_vit_tiny',
                           init_cfg=dict(type='Pretrained', checkpoint='ff_vit_tiny.cls_in1k',
                                         skip=['blocks.*.mixer.*'])),
             # fixed token count: train at the 512 crop, infer with a sliding 512 window
             test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))
# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
