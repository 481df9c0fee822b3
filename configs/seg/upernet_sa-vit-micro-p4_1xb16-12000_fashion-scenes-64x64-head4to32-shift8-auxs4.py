# Probe: the shift8 recipe with the FCN auxiliary head moved from the neck's stride-32 map to the last trunk
# block at its own stride 4. With the neck scales 1, 1/2, 1/4, 1/8, mmseg's in_index=3 hands the auxiliary head a
# 2x2 map of a 64-pixel scene, too coarse to name a 17-45 pixel item; here the trunk returns its last block twice
# and the neck keeps the second copy at stride 4 (scale 1) for the auxiliary head alone, so its loss asks the trunk's
# own tokens to name the item under them (docs/seg_scenes_study.md, "Who names the items: the trunk or the head").
_base_ = ['./upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8.py']
model = dict(backbone=dict(out_indices=[0, 1, 2, 3, 3]),
             neck=dict(scales=[1, 0.5, 0.25, 0.125, 1]),
             auxiliary_head=dict(in_index=4))
