# ImageNet-1k (or any dataset) in the ImageFolder layout: data/imagenet/{train,val}/<class>/<image>.
# Pipelines follow DeiT (Touvron et al., 2021): ClsRandomResizedCrop 224 (bicubic) + mmcv's RandomFlip for training;
# resize the shorter side to 256 and centre-crop 224 (mmcv's CenterCrop) for evaluation. Not implemented here (see docs/training.md):
# RandAugment rand-m9-mstd0.5-inc1, random erasing 0.25, repeated augmentation.
dataset_type = 'ImageFolder'
data_root = 'data/imagenet'
mean, std = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)  # ImageNet RGB, 0..255 scale

train_pipeline = [
    dict(type='ClsLoadImage'),
    dict(type='ClsRandomResizedCrop', size=224, interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackClsInputs', mean=mean, std=std),
]
test_pipeline = [
    dict(type='ClsLoadImage'),
    dict(type='ClsResize', size=256, interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackClsInputs', mean=mean, std=std),
]

train_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root + '/train', pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root + '/val', pipeline=test_pipeline),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='TopKAccuracy', topk=(1, 5))
test_evaluator = val_evaluator
