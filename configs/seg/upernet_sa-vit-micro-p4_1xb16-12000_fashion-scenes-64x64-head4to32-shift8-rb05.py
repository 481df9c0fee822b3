# Probe: the rb1 probe halfway: pixel weights 1 / sqrt(region pixel count), so a region weighs as the square root of
# its size (a 100-pixel fragment a third of a 900-pixel item, instead of a ninth with plain cross-entropy).
_base_ = ['./upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8-rb1.py']
model = dict(decode_head=dict(loss_decode=dict(power=0.5)))
