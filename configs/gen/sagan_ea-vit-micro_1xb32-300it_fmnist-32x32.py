# The bundled checkpoint ea_vit_micro.gen_fmnist: the shared micro GAN recipe (see the base file) for ea.
_base_ = ['./_base_/sagan_vit-micro_1xb32-300it_fmnist-32x32.py']
model = dict(name='ea_vit_micro')
