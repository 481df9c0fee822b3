# The first schedule of the bundled `{mixer}_vit_micro.seg_scenes` checkpoints (they now run it three times as
# long, schedule_scenes_p4_6k.py; the records of these runs are in results/seg_ablation/2000it/): the trunk starts
# from the mixer's Fashion-MNIST classifier (`{mixer}_vit_micro.cls_fmnist`), as mmseg's ADE20K recipes start from
# ImageNet weights, and the head from scratch. 2000 iterations of batch 16 (3.2 epochs of the 10,000 training
# scenes), validated every 250 for the curve. Against schedule_scenes.py: lr 1e-3 instead of 2e-3 (half the
# classifier's peak, so the warm-up and first steps of the fresh head do not wash out the trunk), otherwise the same
# optimiser and policy.
_base_ = ['./schedule_scenes.py']
max_iters = 2000
optim_wrapper = dict(optimizer=dict(lr=1e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=100, end=max_iters, by_epoch=False),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=250)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=max_iters))
