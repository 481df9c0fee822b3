# CPU-sized: a micro GAN for 2k iterations, scored on 2,000 test images. The mixer comparison in
# docs/generation.md trains this config under a fixed time budget (custom_hooks TrainTimeBudgetHook).
_base_ = ['./_base_/models/sagan_zoo-vit.py', './_base_/datasets/fmnist_32.py',
          './_base_/schedules/gan_100k.py', './_base_/default_runtime.py']
model = dict(name='ff_vit_micro', img_size=32, out_chans=1)
train_dataloader = dict(batch_size=32)
val_dataloader = dict(batch_size=200, dataset=dict(max_samples=2000))
test_dataloader = val_dataloader
train_cfg = dict(max_iters=2000, val_interval=1000)
default_hooks = dict(logger=dict(interval=20), checkpoint=dict(interval=1000))
custom_hooks = [dict(type='TrainTimeBudgetHook', seconds=None)]
