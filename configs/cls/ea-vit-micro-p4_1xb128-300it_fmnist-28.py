_base_ = ['_base_/models/vit.py', '_base_/datasets/fmnist_28.py', '_base_/schedules/fmnist_300it.py']
model = dict(name='ea_vit_micro', num_classes=10, img_size=28, in_chans=1, patch_size=4)
# 300 iterations see each training image at most once: augmentation would only slow learning down.
train_dataloader = dict(dataset=dict(pipeline={{_base_.test_pipeline}}))
