# DeiT recipe (see ../_base_/schedules/deit_300e.py): stochastic depth 0.1, label smoothing 0.1, Mixup 0.8 / CutMix 1.0.
_base_ = ['_base_/models/vit.py', '_base_/datasets/imagenet_224.py', '_base_/schedules/deit_300e.py']
model = dict(name='effa_vit_tiny', num_classes=1000, img_size=224, patch_size=16, drop_path_rate=0.1,
             label_smoothing=0.1, mixup=dict(mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5))
