# A SAGAN-style GAN whose trunk stages are zoo blocks (zoo.heads.gen); architecture comes from the registry name.
# Hinge loss; Adam lr 1e-4 (G) / 4e-4 (D), betas (0, 0.9) (TTUR, as SAGAN); one D step per G step.
model = dict(
    type='GANModel',
    name='sa_vit_tiny',
    img_size=32,
    out_chans=3,
    z_dim=128,
    d_steps=1,
    ema_decay=0.999,
)
optim_wrapper = dict(
    constructor='GANOptimWrapperConstructor',
    generator=dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=1e-4, betas=(0.0, 0.9))),
    discriminator=dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=4e-4, betas=(0.0, 0.9))),
)
