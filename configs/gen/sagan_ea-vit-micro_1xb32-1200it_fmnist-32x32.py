# The micro GAN recipe at 1,200 iterations (see the base file) for ea.
_base_ = ['./_base_/sagan_vit-micro_1xb32-1200it_fmnist-32x32.py']
model = dict(name='ea_vit_micro')
