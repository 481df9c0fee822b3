# Probe: the auxs4 probe (the FCN auxiliary head on the last trunk block at stride 4) with the auxiliary loss
# weighted 1.0, as much as the decode head's, instead of mmseg's 0.4.
_base_ = ['./upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8-auxs4.py']
model = dict(auxiliary_head=dict(loss_decode=dict(loss_weight=1.0)))
