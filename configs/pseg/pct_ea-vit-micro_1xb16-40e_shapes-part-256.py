# The bundled checkpoint ea_vit_micro.pseg_shapes: micro model on the generated shapes (make shapes) in the
# ShapeNetPart layout, 12 categories, 256 points, 40 epochs.
_base_ = [
    './_base_/models/pct_zoo-vit.py', './_base_/datasets/shapes_part.py', './_base_/schedules/pct_micro_shapes_40e.py'
]
model = dict(name='ea_vit_micro', num_points=256, k=16)
