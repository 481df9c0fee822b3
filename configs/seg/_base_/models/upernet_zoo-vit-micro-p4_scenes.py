# The micro scenes model with a Fashion-MNIST classifier's tokenizer: patch 4 (a 16x16 token grid on the 64-pixel
# scenes) instead of 8, so an item of 17-45 pixels spans 4-11 tokens, as a 28-pixel Fashion-MNIST image spans 7 in
# the `{mixer}_vit_micro.cls_fmnist` checkpoints that the configs using this start the trunk from.
# The neck rescales by 2, 1, 1/2, 1/4 (instead of UPerNet's 4, 2, 1, 1/2): the head sees the 32, 16, 8, 4 pixel maps
# of the patch-8 configs (strides 2-16), so the finer tokens cost trunk time only. With 4, 2, 1, 1/2 the head's
# largest map would be the full 64x64 and a training step 5-6x slower.
_base_ = ['./upernet_zoo-vit-micro_scenes.py']
model = dict(backbone=dict(patch_size=4), neck=dict(scales=[2, 1, 0.5, 0.25]))
