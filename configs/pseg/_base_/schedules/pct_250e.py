_base_ = ['../default_runtime.py']
# PCT's recipe (Guo et al., 2021; official PyTorch training script), used for part segmentation as for
# classification: SGD lr 0.01, momentum 0.9, weight decay 5e-4, cosine annealing to 1e-4 over 250 epochs, batch 32.
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.01, momentum=0.9, weight_decay=5e-4))
max_epochs = 250
param_scheduler = [dict(type='CosineAnnealingLR', T_max=max_epochs, eta_min=1e-4, by_epoch=True, begin=0,
                        end=max_epochs, convert_to_iter_based=True)]
# ShapeNetPart is validated on its val split every 10 epochs; the last checkpoint is the result (none is
# selected on the test split).
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=10)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=10, by_epoch=True, max_keep_ckpts=3))
