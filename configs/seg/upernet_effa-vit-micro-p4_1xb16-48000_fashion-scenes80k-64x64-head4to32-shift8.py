# The bundled scenes recipe (the 40,000-scene, 24,000-iteration config) doubled again on both levers: eight times
# the training scenes of `make scenes`, 80,000 (`make scenes80k`: the same generator and seed, so its first 40,000
# training scenes are those of `make scenes40k` and its validation scenes those of `make scenes`, which validation
# keeps reading), for four times the iterations of the 12,000-iteration recipe (48,000, the poly decay stretched to
# match), so the number of passes over the training scenes (9.6) stays that of the bundled recipe.
# docs/seg_scenes_study.md, "Eight times the scenes, four times the schedule".
_base_ = ['./upernet_effa-vit-micro-p4_1xb16-24000_fashion-scenes40k-64x64-head4to32-shift8.py']
max_iters = 48000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=100, end=max_iters, by_epoch=False),
]
train_cfg = dict(max_iters=max_iters)
train_dataloader = dict(dataset=dict(data_root='data/fashion_scenes80k'))
