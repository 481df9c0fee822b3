_base_ = ['../default_runtime.py']
# The PCT recipe (SGD lr 0.01, momentum 0.9, weight decay 5e-4, cosine) shortened for micro models on the
# generated shapes (tools/make_shapes.py): 12 epochs on a CPU, a higher peak lr because the run is short.
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='SGD', lr=0.05, momentum=0.9, weight_decay=5e-4))
max_epochs = 12
param_scheduler = [dict(type='CosineAnnealingLR', T_max=max_epochs, eta_min=1e-4, by_epoch=True, begin=0,
                        end=max_epochs, convert_to_iter_based=True)]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=max_epochs)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=max_epochs, by_epoch=True, max_keep_ckpts=1))
