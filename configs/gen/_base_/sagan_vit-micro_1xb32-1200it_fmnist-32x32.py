# The micro GAN recipe at four times the 300-iteration schedule, whose validation FID was still falling for effa
# and ff: same data, model, optimisers, EMA and evaluation; 1,200 iterations of batch 32, validation every 150,
# a checkpoint every 300 (so `--resume` loses little).
_base_ = ['./sagan_vit-micro_1xb32-300it_fmnist-32x32.py']
train_cfg = dict(max_iters=1200, val_interval=150)
default_hooks = dict(checkpoint=dict(interval=300))
