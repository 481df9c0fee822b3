# Fashion-MNIST (Debian package dataset-fashion-mnist, IDX .gz) zero-padded to 32x32, one grey channel.
# Train on the 60k training images; FID/KID/IS against the 10k t10k images (one EMA sample per real image).
# The feature network is this project's Fashion-MNIST classifier (committed weights): keys FID(fmnist-clf) etc.
dataset_type = 'FashionMNIST32'
data_root = '/usr/share/datasets/fashion-mnist'
train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train'),
)
val_dataloader = dict(
    batch_size=250,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test'),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='GenMetric', feature_net=dict(type='fmnist-clf'), scores=['FID', 'KID', 'IS'])
test_evaluator = val_evaluator
