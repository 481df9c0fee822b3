# The demo budget for micro models on Fashion-MNIST: 300 iterations at batch 128 (38,400 images, ~0.7 epoch),
# about a minute per model on 2 idle CPU cores. AdamW lr 2e-3 (a short run tolerates a high rate), weight decay
# 0.05 (none on norms, biases, pos_embed, cls_token), linear warm-up over 30 iterations, cosine to 1e-5; one
# validation at the end.
_base_ = ['../../../_base_/default_runtime.py']

max_iters = 300
warmup_iters = 30
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
                       custom_keys={'pos_embed': dict(decay_mult=0.0), 'cls_token': dict(decay_mult=0.0)}),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=warmup_iters),
    dict(type='CosineAnnealingLR', T_max=max_iters - warmup_iters, eta_min=1e-5, by_epoch=False,
         begin=warmup_iters, end=max_iters),
]
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(enable=False, base_batch_size=128)

default_hooks = dict(
    logger=dict(interval=50),
    checkpoint=dict(by_epoch=False, interval=100, max_keep_ckpts=2),
)
log_processor = dict(by_epoch=False)
