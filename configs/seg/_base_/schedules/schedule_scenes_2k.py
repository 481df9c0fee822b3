# The recipe of the bundled `{mixer}_vit_micro.seg_scenes` checkpoints (`make weights`): the scenes schedule
# (schedule_scenes.py: AdamW lr 2e-3, wd 0.01, linear warm-up, poly) run for 2,000 iterations, validated every 500
# for the curve; the published checkpoint is the last one.
_base_ = ['./schedule_scenes.py']
max_iters = 2000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=100, end=max_iters, by_epoch=False),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=500)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=1))
