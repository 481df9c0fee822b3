# ModelNet40, resampled text layout with normals (modelnet40_normal_resampled, xyz only; model in_dims=6 and
# use_normals=True for normals), PCT protocol: train on the first 1024 points with random
# point dropout, per-axis scale [2/3, 3/2], shift [-0.2, 0.2] and shuffle; test on the first 1024 points, one pass.
dataset_type = 'ModelNet40Normal'
data_root = 'data/modelnet40_normal_resampled'
num_points = 1024
train_pipeline = [
    dict(type='PointSample', num_points=num_points, mode='first'),
    dict(type='PointDropout', max_ratio=0.875),
    dict(type='PointScaleShift', scale=(2.0 / 3.0, 1.5), shift=0.2),
    dict(type='PointShuffle'),
    dict(type='PackPointInputs'),
]
test_pipeline = [dict(type='PointSample', num_points=num_points, mode='first'), dict(type='PackPointInputs')]
train_dataloader = dict(
    batch_size=32, num_workers=4, persistent_workers=True, drop_last=True,
    sampler=dict(type='DefaultSampler', shuffle=True), collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', num_points=num_points, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=32, num_workers=4, persistent_workers=True, drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False), collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', num_points=num_points, pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='PointClsMetric')
test_evaluator = val_evaluator
