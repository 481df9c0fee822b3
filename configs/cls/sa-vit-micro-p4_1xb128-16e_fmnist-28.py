_base_ = ['_base_/models/vit.py', '_base_/datasets/fmnist_28_plain.py', '_base_/schedules/fmnist_16e.py']
model = dict(name='sa_vit_micro', num_classes=10, img_size=28, in_chans=1, patch_size=4)
