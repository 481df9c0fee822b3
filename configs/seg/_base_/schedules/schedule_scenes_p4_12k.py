# A longer schedule for the `{mixer}_vit_micro.seg_scenes` checkpoints: schedule_scenes_p4_6k.py run twice as long
# (12,000 iterations of batch 16, 19.2 epochs of the 10,000 training scenes, validated every 500) at lr 4e-3
# instead of 1e-3. Both changes come from probes kept in results/seg_ablation/ (docs/weights.md): the 6,000-iteration
# curves still gained 0.5-0.8 mIoU over their last 500 iterations, 12,000 iterations of the 1e-3 recipe reached
# 44.03 (`sa`) and 45.31 (`ff`) against 40.13 and 41.52, and lr 4e-3 beat 1e-3 at 2,000 iterations for every mixer
# tried (`sa` +2.6 on the mean of 3 seeds, `ea` +4) and at 6,000 for `sa` (41.07 against 40.13).
# A checkpoint every 1,000 iterations (the last two kept) lets `--resume` continue a run that was stopped.
_base_ = ['./schedule_scenes_p4.py']
max_iters = 12000
optim_wrapper = dict(optimizer=dict(lr=4e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=100),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=100, end=max_iters, by_epoch=False),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=500)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=1000, max_keep_ckpts=2))
