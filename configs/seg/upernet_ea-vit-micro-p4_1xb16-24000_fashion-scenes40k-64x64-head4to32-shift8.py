# The bundled scenes recipe (the shift8 config) on four times the training scenes, 40,000 (`make scenes40k`: the
# same generator and seed, so its first 10,000 training scenes and its validation scenes are those of `make
# scenes`, which validation keeps reading), for twice the iterations (24,000, the poly decay stretched to match).
# docs/seg_scenes_study.md, "Four times the scenes and twice the schedule together".
_base_ = ['./upernet_ea-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8.py']
max_iters = 24000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=100, end=max_iters, by_epoch=False),
]
train_cfg = dict(max_iters=max_iters)
train_dataloader = dict(dataset=dict(data_root='data/fashion_scenes40k'))
