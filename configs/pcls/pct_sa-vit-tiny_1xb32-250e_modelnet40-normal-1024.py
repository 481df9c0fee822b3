# ModelNet40 from the resampled text layout, with normals (in_dims=6).
_base_ = ['./_base_/models/pct_zoo-vit.py', './_base_/datasets/modelnet40_normal.py', './_base_/schedules/pct_250e.py']
model = dict(name='sa_vit_tiny', in_dims=6)
train_dataloader = dict(dataset=dict(use_normals=True))
val_dataloader = dict(dataset=dict(use_normals=True))
test_dataloader = val_dataloader
