"""The GAN as an mmengine model: hinge-loss training with two optimisers, EMA, and evaluation samples.

Loss (Lim & Ye, "Geometric GAN", 2017; as SAGAN/BigGAN)::

    L_D = E[relu(1 - D(x))] + E[relu(1 + D(G(z)))]        L_G = -E[D(G(z))]

Each training iteration updates the discriminator once on a fresh real batch; the generator is updated on every
``d_steps``-th iteration (so ``d_steps`` discriminator steps per generator step, each with its own batch), then the
EMA generator follows it: ``ema = d * ema + (1 - d) * G`` with ``d = min(ema_decay, (1 + n) / (10 + n))`` after n
generator steps (a warm-up so a short run's EMA is not dominated by the random start).

A non-finite loss raises ``FloatingPointError`` naming the iteration *before* the optimiser applies it, so the
weights of the last checkpoint stay usable and ``--resume`` continues from there.
"""
import copy

import torch
import torch.nn.functional as F
from mmengine.logging import MessageHub
from mmengine.model import BaseDataPreprocessor, BaseModel, MMSeparateDistributedDataParallel, is_model_wrapper
from mmengine.optim import OptimWrapperDict, build_optim_wrapper
from mmengine.registry import MODEL_WRAPPERS, MODELS, OPTIM_WRAPPER_CONSTRUCTORS

import zoo


@MODELS.register_module()
class GANDataPreprocessor(BaseDataPreprocessor):
    """Moves a collated batch to the device and maps uint8 images to float [-1, 1]."""

    def forward(self, data, training=False):
        data = self.cast_data(data)
        x = data["inputs"]
        if not torch.is_floating_point(x):
            x = x.float() / 127.5 - 1.0
        out = dict(inputs=x)
        if "index" in data:
            out["index"] = data["index"]
        return out


_WRAPPED = ("generator", "discriminator")


def _unwrap_keys(module, state_dict, prefix, local_metadata):
    for name in _WRAPPED:
        if is_model_wrapper(module._modules.get(name)):
            old = f"{prefix}{name}.module."
            for k in [k for k in state_dict if k.startswith(old)]:
                state_dict[f"{prefix}{name}.{k[len(old):]}"] = state_dict.pop(k)
    return state_dict


def _wrap_keys(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    for name in _WRAPPED:
        if is_model_wrapper(module._modules.get(name)):
            old, wrapped = f"{prefix}{name}.", f"{prefix}{name}.module."
            for k in [k for k in state_dict if k.startswith(old) and not k.startswith(wrapped)]:
                state_dict[wrapped + k[len(old):]] = state_dict.pop(k)


@MODELS.register_module()
class GANModel(BaseModel):
    """A zoo GAN (``zoo.load(name, task='gen')``) trained with the hinge loss.

    The GAN's ``generator``, ``discriminator`` and ``generator_ema`` are registered directly as this model's
    children, so checkpoint keys equal the zoo GAN's keys and mmengine's ``MMSeparateDistributedDataParallel`` wraps
    G and D separately.

    Args:
        name: Registered backbone name (``ea_vit_micro``); the architecture comes from the registry.
        img_size, out_chans, z_dim: GAN arguments (``zoo.heads.gen.build``).
        gan_options: Extra GAN arguments (e.g. ``ch``, ``blocks_per_stage``).
        d_steps: Discriminator steps per generator step.
        ema_decay: Final EMA decay of the sampling generator.
        eval_seed: Base seed of the evaluation latents (sample i uses seed ``eval_seed * 1000003 + index_i``, so a
            checkpoint scores the same on any batch size or number of processes).
        eval_num_fakes: Draw fakes only for the evaluation items with dataset index < this (``None``: one per real
            image). The metric still compares them with *all* real images, e.g. 5,000 fakes against the 10,000
            t10k images when Inception features on CPU make 10,000 fakes too slow.
        data_preprocessor: Config of the preprocessor (default ``GANDataPreprocessor``).
    """

    def __init__(self, name, img_size=32, out_chans=3, z_dim=128, gan_options=None, d_steps=1, ema_decay=0.999,
                 eval_seed=0, eval_num_fakes=None, data_preprocessor=None, init_cfg=None):
        super().__init__(data_preprocessor=data_preprocessor or dict(type="GANDataPreprocessor"), init_cfg=init_cfg)
        gan = zoo.registry.build(name, task="gen", img_size=img_size, out_chans=out_chans, z_dim=z_dim,
                                 **(gan_options or {}))
        object.__setattr__(self, "_gan", gan)  # not a registered child: its parts are (below)
        self.generator = gan.generator
        self.discriminator = gan.discriminator
        self.generator_ema = gan.generator_ema
        self.z_dim = z_dim
        self.d_steps, self.ema_decay, self.eval_seed = int(d_steps), float(ema_decay), int(eval_seed)
        self.eval_num_fakes = None if eval_num_fakes is None else int(eval_num_fakes)
        if self.d_steps < 1:
            raise ValueError(f"d_steps must be >= 1, got {d_steps}")
        self.register_buffer("ema_steps", torch.zeros((), dtype=torch.long))
        self._local_iter = 0
        # Under GANSeparateDistributedDataParallel G and D become DDP wrappers (keys ``generator.module.*``);
        # checkpoints keep the plain keys either way, so DDP and single-process runs load each other's files.
        self._register_state_dict_hook(_unwrap_keys)
        self._register_load_state_dict_pre_hook(_wrap_keys, with_module=True)

    @property
    def zoo_model(self):
        """The ``zoo.heads.gen.GAN`` (with ``zoo_config``) that ``zoo.load(name, task='gen')`` returns."""
        return self._gan

    def init_weights(self):
        """Keep the zoo GAN's own initialisation (and the EMA copy equal to G); mmengine must not re-init."""

    def train(self, mode=True):
        super().train(mode)
        self.generator_ema.eval()
        return self

    # -- training ---------------------------------------------------------------------------------------------
    def _iteration(self):
        it = MessageHub.get_current_instance().get_info("iter")
        return self._local_iter if it is None else int(it)

    @staticmethod
    def _check(name, loss, it):
        if not torch.isfinite(loss).all():
            raise FloatingPointError(
                f"gen: non-finite {name} loss ({loss.item()}) at iteration {it + 1}; training stopped before the "
                f"update. Lower the learning rates or check the data, then resume from the last checkpoint "
                f"(tools/train.py CONFIG --resume).")

    def train_step(self, data, optim_wrapper):
        """One discriminator step, plus a generator step and an EMA update every ``d_steps`` iterations."""
        if not isinstance(optim_wrapper, OptimWrapperDict) or \
                {"generator", "discriminator"} - set(optim_wrapper.keys()):
            raise TypeError("GANModel needs optim_wrapper=dict(constructor='GANOptimWrapperConstructor', "
                            "generator=..., discriminator=...)")
        it = self._iteration()
        real = self.data_preprocessor(data, True)["inputs"]
        B = real.shape[0]
        opt_d, opt_g = optim_wrapper["discriminator"], optim_wrapper["generator"]
        with opt_d.optim_context(self.discriminator):
            with torch.no_grad():
                fake = self.generator(torch.randn(B, self.z_dim, device=real.device))
            d_real, d_fake = self.discriminator(real), self.discriminator(fake)
            loss_d = F.relu(1.0 - d_real).mean() + F.relu(1.0 + d_fake).mean()
        self._check("discriminator", loss_d, it)
        opt_d.update_params(loss_d)
        log = dict(loss_d=loss_d.detach(), d_real=d_real.detach().mean(), d_fake=d_fake.detach().mean())
        if (it + 1) % self.d_steps == 0:
            # G's step needs no D gradients; the raw D (never its DDP wrapper) is frozen for it.
            disc = self._gan.discriminator.requires_grad_(False)
            try:
                with opt_g.optim_context(self.generator):
                    loss_g = -disc(self.generator(torch.randn(B, self.z_dim, device=real.device))).mean()
                self._check("generator", loss_g, it)
                opt_g.update_params(loss_g)
            finally:
                disc.requires_grad_(True)
            n = int(self.ema_steps)
            self._gan.update_ema(min(self.ema_decay, (1.0 + n) / (10.0 + n)))
            self.ema_steps += 1
            log["loss_g"] = loss_g.detach()
        self._local_iter = it + 1
        return log

    # -- evaluation -------------------------------------------------------------------------------------------
    @torch.no_grad()
    def _fakes(self, index, device):
        z = torch.stack([torch.randn(self.z_dim, generator=torch.Generator().manual_seed(
            self.eval_seed * 1000003 + int(i))) for i in index])  # (B, z_dim), per-sample seeds, drawn on CPU
        self.generator_ema.eval()
        return self.generator_ema(z.to(device)).clamp(-1.0, 1.0)

    def val_step(self, data):
        """Return ``[dict(real=..., fake=...)]`` per real image: one EMA sample per real image, seeded by index
        (``fake=None`` for indices >= ``eval_num_fakes``)."""
        data = self.data_preprocessor(data, False)
        real = data["inputs"]
        index = data.get("index")
        if index is None:
            raise KeyError("gen evaluation needs the dataset item 'index' (the per-sample latent seed)")
        index = index.tolist() if torch.is_tensor(index) else [int(i) for i in index]
        keep = [k for k, i in enumerate(index) if self.eval_num_fakes is None or i < self.eval_num_fakes]
        fakes = iter(self._fakes([index[k] for k in keep], real.device) if keep else [])
        keep = set(keep)
        return [dict(real=r, fake=next(fakes) if k in keep else None) for k, r in enumerate(real)]

    def test_step(self, data):
        return self.val_step(data)

    def forward(self, inputs=None, data_samples=None, mode="tensor"):
        """``mode='tensor'``: EMA generator images for latents ``inputs`` (B, z_dim). Training goes through
        ``train_step`` (two optimisers), so ``mode='loss'`` is refused."""
        if mode == "loss":
            raise RuntimeError("GANModel trains through train_step (two optimisers); forward(mode='loss') is unused")
        return self.generator_ema(inputs)


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class GANOptimWrapperConstructor:
    """Builds ``OptimWrapperDict(generator=..., discriminator=...)``, each over that network's parameters only.

    Config::

        optim_wrapper = dict(constructor='GANOptimWrapperConstructor',
                             generator=dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=1e-4, ...)),
                             discriminator=dict(type='OptimWrapper', optimizer=dict(type='Adam', lr=4e-4, ...)))
    """

    def __init__(self, optim_wrapper_cfg, paramwise_cfg=None):
        missing = {"generator", "discriminator"} - set(optim_wrapper_cfg)
        if missing:
            raise KeyError(f"GANOptimWrapperConstructor: optim_wrapper needs entries {sorted(missing)}")
        self.cfg = optim_wrapper_cfg
        self.paramwise_cfg = paramwise_cfg

    def __call__(self, model):
        module = model.module if is_model_wrapper(model) else model
        wrappers = {}
        for key in ("generator", "discriminator"):
            cfg = copy.deepcopy(dict(self.cfg[key]))
            if self.paramwise_cfg is not None:
                cfg.setdefault("paramwise_cfg", self.paramwise_cfg)
            wrappers[key] = build_optim_wrapper(getattr(module, key), cfg)
        return OptimWrapperDict(**wrappers)


@MODEL_WRAPPERS.register_module()
class GANSeparateDistributedDataParallel(MMSeparateDistributedDataParallel):
    """mmengine's ``MMSeparateDistributedDataParallel`` (G and D each in their own DDP, ``train_step`` delegated to
    the model) that also works on CPU: the Runner's ``device_ids`` are dropped when CUDA is absent (gloo)."""

    def __init__(self, module, broadcast_buffers=False, find_unused_parameters=False, **kwargs):
        if not torch.cuda.is_available():
            kwargs.pop("device_ids", None)
            kwargs.pop("output_device", None)
        super().__init__(module, broadcast_buffers=broadcast_buffers, find_unused_parameters=find_unused_parameters,
                         **kwargs)
