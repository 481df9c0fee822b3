# Probe: the shift8 recipe with a decode-head loss that weighs every region alike (RegionBalancedCrossEntropy,
# power 1: pixel weights 1 / the pixel count of the pixel's region), so that a 40-pixel fragment counts as much as
# a 900-pixel item; plain cross-entropy weighs the small, partly hidden items, the ones the segmentors misname, by
# their few pixels (docs/seg_scenes_study.md, "Every region weighed alike").
_base_ = ['./upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8.py']
model = dict(decode_head=dict(loss_decode=dict(_delete_=True, type='RegionBalancedCrossEntropy', power=1.0)))
