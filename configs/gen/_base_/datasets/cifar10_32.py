# CIFAR-10 from the python batches (data/cifar10/cifar-10-batches-py/{data_batch_1..5,test_batch}), 32x32 RGB.
# Train on the 50k training images; FID/KID against the 10k test images. The default feature network is the
# Fashion-MNIST classifier (available everywhere; scores named FID(fmnist-clf), NOT comparable to Inception FID).
# With pytorch-fid's Inception weights on disk, use the standard network instead:
#   --cfg-options "test_evaluator.feature_net.type=inception-v3" \
#                 "test_evaluator.feature_net.weights=/path/pt_inception-2015-12-05-6726825d.pth"
dataset_type = 'CIFAR10Batches'
data_root = 'data/cifar10'
train_dataloader = dict(
    batch_size=64,
    num_workers=2,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train'),
)
val_dataloader = dict(
    batch_size=250,
    num_workers=2,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test'),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='GenMetric', feature_net=dict(type='fmnist-clf'), scores=['FID', 'KID', 'IS'])
test_evaluator = val_evaluator
