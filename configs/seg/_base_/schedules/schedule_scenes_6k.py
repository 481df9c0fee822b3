# The scenes schedule four times longer: 6000 iterations of batch 16 (9.6 epochs of the 10,000 training scenes),
# validated every 500: the next step for the scenes, since at 1500 iterations the bundled seg_scenes checkpoints'
# mIoU was still rising (18 -> 26 -> 28 at 500 / 1000 / 1500) when the poly decay ended the run. Not run to the end
# yet: about 45-60 CPU-minutes per mixer on the 2-core machines (0.45-0.63 s per iteration measured at its start).
# Warm-up and optimiser as schedule_scenes.py.
_base_ = ['./schedule_scenes.py']
max_iters = 6000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=100, end=max_iters, by_epoch=False),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=500)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=max_iters))
