# Micro model on the generated shapes (python tools/make_shapes.py --out data/shapes --seed 0) in the ShapeNetPart
# layout: 12 ShapeNetPart categories, 256 points (grouping stages of 128 and 64 centres, k = 16).
_base_ = [
    './_base_/models/pct_zoo-vit.py', './_base_/datasets/shapes_part.py', './_base_/schedules/pct_micro_shapes.py'
]
model = dict(name='ea_vit_micro', num_points=256, k=16)
