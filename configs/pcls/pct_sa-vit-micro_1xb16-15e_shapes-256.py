# The bundled checkpoint sa_vit_micro.pcls_shapes: micro model on the generated shapes (make shapes), 12 classes,
# 256 points, 15 epochs.
_base_ = [
    './_base_/models/pct_zoo-vit.py', './_base_/datasets/shapes_h5.py', './_base_/schedules/pct_micro_shapes_15e.py'
]
model = dict(name='sa_vit_micro', num_classes=12, num_points=256, k=16)
