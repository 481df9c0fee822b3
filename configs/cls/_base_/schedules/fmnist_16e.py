# The recipe of the bundled Fashion-MNIST checkpoints (`{mixer}_vit_micro.cls_fmnist`, `make weights`): 16 epochs at
# batch 128 (6,880 iterations), AdamW lr 2e-3, weight decay 0.05 (none on norms, biases, pos_embed, cls_token),
# 1 warm-up epoch, cosine to 1e-5, with the plain data of `fmnist_28_plain.py`. No augmentation: the 0.2 M-parameter
# model underfits Fashion-MNIST (with random crop + flip, sa_vit_micro was at 81.7% after 7 of 10 epochs at lr 1e-3,
# training loss 0.5), so the budget goes to fitting. The same recipe for 8 epochs (published before; git history)
# ended with the validation top-1 still rising by 0.2-0.4 per epoch and the training loss at 0.28-0.33 for
# sa/ea/effa; this one doubles the budget and changes nothing else. Validation on the held-out 5,000 training images
# each epoch keeps the curve; the published checkpoint is the last one (no selection), scored on t10k.
# Written out in full rather than overriding `max_epochs`: mmengine evaluates a base's `T_max` when it loads it.
_base_ = ['./fmnist_20e.py']
max_epochs = 16
optim_wrapper = dict(optimizer=dict(lr=2e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, begin=0, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - 1, eta_min=1e-5, by_epoch=True, begin=1, end=max_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=1)
default_hooks = dict(checkpoint=dict(interval=1, max_keep_ckpts=1, save_best=None))
