_base_ = ['./_base_/models/sagan_zoo-vit.py', './_base_/datasets/fmnist_32.py',
          './_base_/schedules/gan_100k.py', './_base_/default_runtime.py']
model = dict(name='sa_vit_tiny', img_size=32, out_chans=1)
