_base_ = ['./_base_/models/pct_zoo-vit.py', './_base_/datasets/modelnet40_h5.py', './_base_/schedules/pct_250e.py']
model = dict(name='sa_vit_tiny')
