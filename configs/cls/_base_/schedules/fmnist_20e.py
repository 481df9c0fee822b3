# A full training of micro models on Fashion-MNIST: 20 epochs at batch 128 (~8,600 iterations), AdamW lr 1e-3,
# weight decay 0.05 (none on norms, biases, pos_embed, cls_token), 1 warm-up epoch, cosine to 1e-5. Validation on
# the held-out 5,000 training images each epoch selects the best checkpoint; t10k is only for the final test.
_base_ = ['../../../_base_/default_runtime.py']

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
                       custom_keys={'pos_embed': dict(decay_mult=0.0), 'cls_token': dict(decay_mult=0.0)}),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, begin=0, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=19, eta_min=1e-5, by_epoch=True, begin=1, end=20,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=20, val_interval=1)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
auto_scale_lr = dict(enable=False, base_batch_size=128)

default_hooks = dict(
    logger=dict(interval=100),
    checkpoint=dict(interval=1, max_keep_ckpts=2, save_best='top1', rule='greater'),
)
