# Fashion-MNIST at 28x28 (fmnist_28.py) without training augmentation, for the short recipe of the bundled micro
# checkpoints (schedules/fmnist_16e.py says why).
_base_ = ['./fmnist_28.py']
train_pipeline = [dict(type='PackClsInputs', mean={{_base_.mean}}, std={{_base_.std}})]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
