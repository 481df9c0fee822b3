# The micro GAN recipe at four times the schedule of the 300-iteration one: same data, model, optimisers, EMA
# (decay 0.999, so a horizon of about 1,000 iterations, which 300 iterations did not reach) and evaluation;
# 1,200 iterations of batch 32, validation every 150, a checkpoint every 300 (so `--resume` loses little).
_base_ = ['./sagan_vit-micro_1xb32-300it_fmnist-32x32.py']
train_cfg = dict(max_iters=1200, val_interval=150)
default_hooks = dict(checkpoint=dict(interval=300))
