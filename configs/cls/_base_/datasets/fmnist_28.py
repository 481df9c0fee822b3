# Fashion-MNIST (Debian package dataset-fashion-mnist, IDX .gz files) at 28x28, one grey channel.
# train: the first 55,000 training images; val: the last 5,000 (held out, for model selection); test: t10k.
dataset_type = 'FashionMNIST'
data_root = '/usr/share/datasets/fashion-mnist'
mean, std = (72.94,), (90.02,)  # of the 60,000 training images, 0..255 scale

train_pipeline = [
    dict(type='ClsRandomCrop', size=28, padding=2),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackClsInputs', mean=mean, std=std),
]
test_pipeline = [dict(type='PackClsInputs', mean=mean, std=std)]

train_dataloader = dict(
    batch_size=128,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', index_range=(0, 55000),
                 pipeline=train_pipeline),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', index_range=(55000, 60000),
                 pipeline=test_pipeline),
)
test_dataloader = dict(
    batch_size=256,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', pipeline=test_pipeline),
)
val_evaluator = dict(type='TopKAccuracy', topk=(1, 5))
test_evaluator = val_evaluator
