# The 12,000-iteration scenes recipe with two changes, shared by all four mixers (docs/seg_scenes_study.md,
# "Scenes at their own scale"): the neck's rescales 1, 1/2, 1/4, 1/8 (the head at strides 4-32, 0.63x the step
# time, same mIoU) and no random rescaling of the training scenes (ratio 1.0: the items keep the 0.6-1.6x scales
# make_scenes.py drew, as in validation; crop and flip stay no-ops or random as before).
_base_ = ['./upernet_effa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64.py']
model = dict(neck=dict(scales=[1, 0.5, 0.25, 0.125]))
train_pipeline = {{_base_.train_pipeline_own_scale}}
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
