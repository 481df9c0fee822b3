# The bundled checkpoint effa_vit_micro.gen_fmnist: the shared micro GAN recipe (see the base file) for effa.
_base_ = ['./_base_/sagan_vit-micro_1xb32-300it_fmnist-32x32.py']
model = dict(name='effa_vit_micro')
