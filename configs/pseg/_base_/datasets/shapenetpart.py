# ShapeNetPart (shapenetcore_partanno_segmentation_benchmark_v0_normal), xyz only, 2048 points: train on a random
# 2048-point subset of each shape with per-axis scale [2/3, 3/2], shift [-0.2, 0.2] and shuffle (the part
# segmentation training of DGCNN/PCT: no point dropout, which collapses up to 87.5% of the points onto one and
# erases small parts); validate on the val split and test on the test split with the first 2048 points, one pass.
dataset_type = 'ShapeNetPart'
data_root = 'data/shapenetcore_partanno_segmentation_benchmark_v0_normal'
num_points = 2048
train_pipeline = [
    dict(type='PointSample', num_points=num_points, mode='random'),
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
    dataset=dict(type=dataset_type, data_root=data_root, split='val', pipeline=test_pipeline))
test_dataloader = dict(
    batch_size=32, num_workers=4, persistent_workers=True, drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False), collate_fn=dict(type='default_collate'),
    dataset=dict(type=dataset_type, data_root=data_root, split='test', pipeline=test_pipeline))
val_evaluator = dict(type='PartIoUMetric')
test_evaluator = val_evaluator
