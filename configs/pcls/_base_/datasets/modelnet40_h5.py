# ModelNet40, HDF5 layout (modelnet40_ply_hdf5_2048), PCT protocol: train on the first 1024 points with random
# point dropout, per-axis scale [2/3, 3/2], shift [-0.2, 0.2] and shuffle; test on the first 1024 points, one pass.
dataset_type = 'ModelNet40H5'
data_root = 'data/modelnet40_ply_hdf5_2048'
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
    dataset=dict(type=dataset_type, data_root=data_root, split='train', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=32, num_workers=4, persistent_workers=True, drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False), collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='PointClsMetric')
test_evaluator = val_evaluator
