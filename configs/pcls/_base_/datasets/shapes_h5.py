# The generated shapes (tools/make_shapes.py) in the ModelNet40 HDF5 layout: 12 classes, 2048 points per shape.
# The ModelNet40 pipelines at 256 points and batch 16 (micro models on a CPU).
_base_ = ['./modelnet40_h5.py']
data_root = 'data/shapes/modelnet40_ply_hdf5_2048'
num_points = 256
train_pipeline = [
    dict(type='PointSample', num_points=num_points, mode='first'),
    dict(type='PointDropout', max_ratio=0.875),
    dict(type='PointScaleShift', scale=(2.0 / 3.0, 1.5), shift=0.2),
    dict(type='PointShuffle'),
    dict(type='PackPointInputs'),
]
test_pipeline = [dict(type='PointSample', num_points=num_points, mode='first'), dict(type='PackPointInputs')]
train_dataloader = dict(batch_size=16, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(batch_size=32, num_workers=0, persistent_workers=False,
                      dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader
