_base_ = ['./_base_/models/pct_zoo-vit.py', './_base_/datasets/shapenetpart.py', './_base_/schedules/pct_250e.py']
model = dict(name='ff_vit_tiny')
