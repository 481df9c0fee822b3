# The generated shapes (tools/make_shapes.py) in the ShapeNetPart layout: 12 ShapeNetPart categories with their
# global part ids. The ShapeNetPart pipelines at 256 points and batch 16 (micro models on a CPU).
_base_ = ['./shapenetpart.py']
data_root = 'data/shapes/shapenetcore_partanno_segmentation_benchmark_v0_normal'
num_points = 256
train_pipeline = [
    dict(type='PointSample', num_points=num_points, mode='random'),
    dict(type='PointScaleShift', scale=(2.0 / 3.0, 1.5), shift=0.2),
    dict(type='PointShuffle'),
    dict(type='PackPointInputs'),
]
test_pipeline = [dict(type='PointSample', num_points=num_points, mode='first'), dict(type='PackPointInputs')]
train_dataloader = dict(batch_size=16, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=32, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = dict(batch_size=32, num_workers=0, persistent_workers=False,
                       dataset=dict(data_root=data_root, pipeline=test_pipeline))
