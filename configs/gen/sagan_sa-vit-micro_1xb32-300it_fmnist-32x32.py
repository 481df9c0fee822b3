# The micro GAN recipe at 300 iterations (see the base file) for sa.
_base_ = ['./_base_/sagan_vit-micro_1xb32-300it_fmnist-32x32.py']
model = dict(name='sa_vit_micro')
