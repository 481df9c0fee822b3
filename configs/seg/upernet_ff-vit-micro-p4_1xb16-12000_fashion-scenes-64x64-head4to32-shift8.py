# The bundled scenes recipe (head at strides 4-32, scenes at their own scale) with a random whole-pixel shift of up
# to 8 px (2 tokens) each way in place of the no-op resize and crop: nothing is resampled, and every item moves to
# new token positions, which ff's position-specific token mixing needs (docs/seg_scenes_study.md, "What ff needs
# instead: a shift, not a rescale"). Bundled on 2026-12-06; the bundled 40,000-scene recipe builds on it.
_base_ = ['./upernet_ff-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-norescale.py']
train_pipeline = {{_base_.train_pipeline_shift8}}
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
