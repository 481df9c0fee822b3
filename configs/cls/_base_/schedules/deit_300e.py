# DeiT recipe (Touvron et al., 2021, "Training data-efficient image transformers"): AdamW, lr 5e-4 x batch/512,
# weight decay 0.05 (none on norms, biases, pos_embed, cls_token), 5 warm-up epochs from 1e-6, cosine to 1e-5,
# 300 epochs. Written for a total batch of 1024 (8 GPUs x 128): lr = 5e-4 * 1024 / 512 = 1e-3. With another total
# batch, pass --auto-scale-lr to tools/train.py (linear scaling from auto_scale_lr.base_batch_size).
_base_ = ['../../../_base_/default_runtime.py']

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
                       custom_keys={'pos_embed': dict(decay_mult=0.0), 'cls_token': dict(decay_mult=0.0)}),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=295, eta_min=1e-5, by_epoch=True, begin=5, end=300,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=300, val_interval=1)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(enable=False, base_batch_size=1024)

default_hooks = dict(
    logger=dict(interval=100),
    checkpoint=dict(interval=1, max_keep_ckpts=3, save_best='top1', rule='greater'),
)
