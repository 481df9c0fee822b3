"""Image generation: a SAGAN-style GAN whose attention stages are trunk blocks of the chosen token mixer.

Zhang et al., "Self-Attention Generative Adversarial Networks" (SAGAN, ICML 2019), https://arxiv.org/abs/1805.08318
Brock et al., "Large Scale GAN Training for High Fidelity Natural Image Synthesis" (BigGAN, ICLR 2019),
https://arxiv.org/abs/1809.11096 (the residual up/down blocks and the 32x32 layout used here)
Miyato et al., "Spectral Normalization for Generative Adversarial Networks" (ICLR 2018),
https://arxiv.org/abs/1802.05957
Guo et al., "Beyond Self-attention: External Attention using Two Linear Layers for Visual Tasks" (2021) replaced
SAGAN's self-attention by its mixer; here every mixer of the zoo takes that place through the zoo's own ``Block``.

Layout for ``img_size=32`` (``ch`` conv channels, ``T`` = a trunk stage, see ``TrunkStage``)::

    generator      z (B, z_dim) -> SN-Linear -> (B, ch, 4, 4) -> ResUp -> 8x8 -> T -> ResUp -> 16x16 -> T
                   -> ResUp -> 32x32 -> BN, ReLU, SN-conv3x3, tanh -> (B, out_chans, 32, 32) in [-1, 1]
    discriminator  x -> ResDown -> 16x16 -> T -> ResDown -> 8x8 -> T -> ResDown -> 4x4 -> Res -> ReLU, sum over
                   space -> SN-Linear -> (B,) logits

Other power-of-two sizes (>= 16) add or remove up/down stages; trunk stages sit at the 8x8 and 16x16 resolutions of
both networks. Spectral normalisation wraps every conv and linear layer of both networks, trunk stages included
(their 1x1 projections and the mixers' and MLPs' linear layers), as SAGAN does: it normalises the layers of both
networks, the 1x1 convs of its attention block included (the SN non-local block of its released code, which
BigGAN-PyTorch reproduces).

Sizing by the backbone size (``zoo.backbones.vit.SIZES``: embed_dim E, depth L, heads h):

* a trunk stage has width E, h heads and ``max(1, L // 4)`` blocks (the trunk's depth split over the four trunk
  stages of G and D: micro and mini 1 block per stage, tiny/small/base 3);
* conv channels ``ch = min(E, 256)`` (256 is BigGAN's CIFAR width; wider convs buy little at 32x32), so
  micro 64, mini 128, tiny 192, small and base 256; a 1x1 conv maps ch <-> E when they differ.

``sample(n, seed)`` draws from the EMA copy of the generator (``generator_ema``) in eval mode.

A published folder holds the EMA generator only (``PUBLISHED_PREFIX``): it is what sampling and FID use, and a
third of the whole GAN's weights. Loading such a folder also copies it into ``generator`` (so fine-tuning starts
from it); the discriminator keeps its fresh initialisation. The training checkpoint of ``tools/train.py`` keeps all
three networks, for resuming.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm

from .. import mixers
from ..backbones.vit import SIZES, build_blocks, init_trunk

TRUNK_RESOLUTIONS = (8, 16)


def _sn(module, enabled=True):
    return spectral_norm(module) if enabled else module


def _sn_all(module):
    """Spectral norm on every conv / linear layer of ``module`` not normalised yet (the trunk stages' layers are
    built by shared code without it)."""
    for m in list(module.modules()):
        if isinstance(m, (nn.Linear, nn.Conv2d)) and not hasattr(m, "parametrizations"):
            spectral_norm(m)


class TrunkStage(nn.Module):
    """Trunk blocks of a mixer applied to a conv feature map, gated like SAGAN's attention layer.

    ``out = x + gamma * proj_out(blocks(proj_in(x) as tokens + pos_embed))`` with ``gamma`` starting at 0, so the
    network first learns the local convolutional path and mixes in the global one gradually (SAGAN, Sec. 4).

    Args:
        channels: Conv channels of the feature map.
        resolution: Side of the (square) map; the stage holds ``resolution ** 2`` tokens.
        dim, depth, num_heads, mixer: Trunk width, number of blocks, heads and mixer code.
        mixer_options: Extra keyword arguments of the mixer.
    """

    def __init__(self, channels, resolution, dim, depth, num_heads, mixer="sa", mixer_options=None):
        super().__init__()
        num_tokens = resolution * resolution
        self.proj_in = nn.Conv2d(channels, dim, 1) if channels != dim else nn.Identity()
        self.pos_embed = nn.Parameter(torch.zeros(1, num_tokens, dim))
        self.blocks = build_blocks(dim, depth, num_heads, mixer=mixer, num_tokens=num_tokens,
                                   mixer_options=mixer_options)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.proj_out = nn.Conv2d(dim, channels, 1) if channels != dim else nn.Identity()
        self.gamma = nn.Parameter(torch.zeros(1))
        self.resolution = resolution
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        init_trunk(self.blocks)

    def forward(self, x):
        B, _, H, W = x.shape
        if (H, W) != (self.resolution, self.resolution):
            raise ValueError(f"trunk stage built for {self.resolution}x{self.resolution} maps got {H}x{W}")
        t = self.proj_in(x).flatten(2).transpose(1, 2) + self.pos_embed  # (B, HW, D)
        for blk in self.blocks:
            t = blk(t)
        t = self.norm(t).transpose(1, 2).reshape(B, -1, H, W)  # (B, D, H, W)
        return x + self.gamma * self.proj_out(t)


class ResBlockUp(nn.Module):
    """BigGAN generator block: BN-ReLU-up-conv3x3-BN-ReLU-conv3x3 plus an upsampled 1x1-conv shortcut."""

    def __init__(self, in_ch, out_ch, sn=True):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_ch)
        self.conv1 = _sn(nn.Conv2d(in_ch, out_ch, 3, padding=1), sn)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.conv2 = _sn(nn.Conv2d(out_ch, out_ch, 3, padding=1), sn)
        self.shortcut = _sn(nn.Conv2d(in_ch, out_ch, 1), sn)

    def forward(self, x):
        h = F.interpolate(F.relu(self.bn1(x)), scale_factor=2, mode="nearest")
        h = self.conv2(F.relu(self.bn2(self.conv1(h))))
        return h + self.shortcut(F.interpolate(x, scale_factor=2, mode="nearest"))


class ResBlockDown(nn.Module):
    """BigGAN discriminator block: (ReLU)-conv3x3-ReLU-conv3x3-(avgpool) plus a 1x1-conv shortcut.

    The first block of the discriminator (``preact=False``) skips the leading ReLU (it sees the image) and pools
    its input before the shortcut conv, as in the SN-GAN/BigGAN "optimized" block.
    """

    def __init__(self, in_ch, out_ch, down=True, preact=True, sn=True):
        super().__init__()
        self.down, self.preact = down, preact
        self.conv1 = _sn(nn.Conv2d(in_ch, out_ch, 3, padding=1), sn)
        self.conv2 = _sn(nn.Conv2d(out_ch, out_ch, 3, padding=1), sn)
        self.shortcut = _sn(nn.Conv2d(in_ch, out_ch, 1), sn) if (in_ch != out_ch or down) else nn.Identity()

    def forward(self, x):
        h = F.relu(x) if self.preact else x
        h = self.conv2(F.relu(self.conv1(h)))
        if self.down:
            h = F.avg_pool2d(h, 2)
        if not self.preact:  # pool then project: same result as project then pool, 4x cheaper
            s = self.shortcut(F.avg_pool2d(x, 2) if self.down else x)
        else:
            s = self.shortcut(x)
            s = F.avg_pool2d(s, 2) if self.down else s
        return h + s


def _num_stages(img_size):
    n = math.log2(img_size / 4) if img_size >= 16 else -1
    if n != int(n) or n < 2:
        raise ValueError(f"gen: img_size must be a power of two >= 16 (the networks double/halve from 4x4), "
                         f"got {img_size}")
    return int(n)


class Generator(nn.Module):
    """z (B, z_dim) -> images (B, out_chans, img_size, img_size) in [-1, 1] (see the module docstring); spectral
    norm on every layer."""

    def __init__(self, z_dim=128, img_size=32, out_chans=3, ch=256, trunk=None):
        super().__init__()
        self.z_dim, self.ch = z_dim, ch
        self.fc = _sn(nn.Linear(z_dim, 4 * 4 * ch))
        stages, res = [], 4
        for _ in range(_num_stages(img_size)):
            res *= 2
            stages.append(ResBlockUp(ch, ch))
            if res in TRUNK_RESOLUTIONS:
                stages.append(TrunkStage(ch, res, **trunk))
        self.stages = nn.Sequential(*stages)
        self.bn = nn.BatchNorm2d(ch)
        self.conv_out = _sn(nn.Conv2d(ch, out_chans, 3, padding=1))
        _sn_all(self)  # the trunk stages' projections and blocks (SAGAN normalises its attention layer in G too)

    def forward(self, z):
        x = self.fc(z).view(z.shape[0], self.ch, 4, 4)  # (B, ch, 4, 4)
        x = self.stages(x)
        return torch.tanh(self.conv_out(F.relu(self.bn(x))))


class Discriminator(nn.Module):
    """Images (B, in_chans, img_size, img_size) -> real/fake logits (B,); spectral norm on every layer."""

    def __init__(self, img_size=32, in_chans=3, ch=256, trunk=None):
        super().__init__()
        stages, res, c_in = [], img_size, in_chans
        for i in range(_num_stages(img_size)):
            res //= 2
            stages.append(ResBlockDown(c_in, ch, down=True, preact=i > 0))
            c_in = ch
            if res in TRUNK_RESOLUTIONS:
                stages.append(TrunkStage(ch, res, **trunk))
        stages.append(ResBlockDown(ch, ch, down=False))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(ch, 1)
        # SN on the trunk's linear layers too: the discriminator is kept (approximately) 1-Lipschitz per layer.
        _sn_all(self)

    def forward(self, x):
        h = F.relu(self.stages(x)).sum(dim=(2, 3))  # (B, ch), sum pooling as SN-GAN / BigGAN
        return self.fc(h).squeeze(1)


def _init_convs(module):
    """Zero biases of the conv/linear layers outside the trunk blocks, and Xavier-uniform weights for those of them
    without spectral norm (BigGAN uses orthogonal or Xavier; the trunk keeps its timm-style init).

    Spectrally normalised layers keep PyTorch's default i.i.d. uniform weights: W / sigma(W) does not depend on the
    scale of an i.i.d. init, so Xavier would give the same distribution, and re-initialising ``original`` after
    the parametrisation was built would leave its power-iteration vectors stale."""
    trunk = {id(m) for s in module.modules() if isinstance(s, TrunkStage) for m in s.blocks.modules()}
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)) and id(m) not in trunk:
            if not hasattr(m, "parametrizations"):
                nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class GAN(nn.Module):
    """A generator, its EMA copy and a discriminator.

    Args:
        mixer: Mixer code of the trunk stages.
        img_size: Image side (power of two >= 16).
        out_chans: Image channels (3 for CIFAR-10, 1 for Fashion-MNIST).
        z_dim: Latent size.
        ch: Conv channels of both networks.
        embed_dim, depth, num_heads: Backbone size (``SIZES``); see the module docstring for how they size the
            trunk stages.
        blocks_per_stage: Blocks per trunk stage (default ``max(1, depth // 4)``).
        mixer_options: Extra keyword arguments of the mixer.
    """

    def __init__(self, mixer="sa", img_size=32, out_chans=3, z_dim=128, ch=None, embed_dim=64, depth=4,
                 num_heads=2, blocks_per_stage=None, mixer_options=None):
        super().__init__()
        mixers.get(mixer)  # unknown names fail here with the list of mixers
        self.img_size, self.out_chans, self.z_dim = img_size, out_chans, z_dim
        ch = ch or min(embed_dim, 256)
        trunk = dict(dim=embed_dim, depth=blocks_per_stage or max(1, depth // 4), num_heads=num_heads, mixer=mixer,
                     mixer_options=mixer_options)
        self.generator = Generator(z_dim, img_size, out_chans, ch, trunk)
        self.discriminator = Discriminator(img_size, out_chans, ch, trunk)
        _init_convs(self.generator)
        _init_convs(self.discriminator)
        torch_state = torch.random.get_rng_state()
        self.generator_ema = Generator(z_dim, img_size, out_chans, ch, trunk)
        torch.random.set_rng_state(torch_state)  # the EMA copy's throwaway init consumes no draws
        self.generator_ema.load_state_dict(self.generator.state_dict())
        self.generator_ema.requires_grad_(False)
        self.generator_ema.eval()

    #: The part of the state dict that a published folder holds (``zoo.hub.save_pretrained``).
    PUBLISHED_PREFIX = "generator_ema."

    def published_state_dict(self):
        """The EMA generator's weights, under their full names (``generator_ema.*``)."""
        return {self.PUBLISHED_PREFIX + k: v for k, v in self.generator_ema.state_dict().items()}

    def load_published_state_dict(self, state):
        """Load the EMA generator's weights (``published_state_dict``'s keys) and copy them into ``generator``.

        The keys must already have been checked (``zoo.checkpoint.load_state_dict`` does).
        """
        n = len(self.PUBLISHED_PREFIX)
        self.generator_ema.load_state_dict({k[n:]: v for k, v in state.items()}, strict=True)
        self.generator.load_state_dict(self.generator_ema.state_dict(), strict=True)
        return self

    def train(self, mode=True):
        """Train/eval the generator and discriminator; the EMA generator always stays in eval mode."""
        super().train(mode)
        self.generator_ema.eval()
        return self

    @torch.no_grad()
    def update_ema(self, decay):
        """``ema = decay * ema + (1 - decay) * generator`` for parameters; buffers (BN statistics, spectral-norm
        vectors) are copied."""
        ema_p = dict(self.generator_ema.named_parameters())
        for name, p in self.generator.named_parameters():
            ema_p[name].lerp_(p.detach(), 1.0 - decay)
        ema_b = dict(self.generator_ema.named_buffers())
        for name, b in self.generator.named_buffers():
            ema_b[name].copy_(b)

    def forward(self, z):
        """Images of the EMA generator for latents ``z`` (B, z_dim), in [-1, 1]."""
        return self.generator_ema(z)

    @torch.no_grad()
    def sample(self, n, seed=None, batch_size=256, device=None):
        """Draw ``n`` images (n, out_chans, img_size, img_size) in [-1, 1] from the EMA generator.

        Args:
            n: Number of images.
            seed: Seed of the latents (deterministic output for a seed); ``None`` uses torch's global RNG.
            batch_size: Images per generator call.
            device: Device of the output (default: the model's).
        """
        device = device or next(self.generator_ema.parameters()).device
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        z = torch.randn(n, self.z_dim, generator=gen)  # drawn on CPU so a seed gives the same images everywhere
        was_training = self.generator_ema.training
        self.generator_ema.eval()
        out = torch.cat([self.generator_ema(zb.to(device)) for zb in z.split(batch_size)]) if n else \
            torch.empty(0, self.out_chans, self.img_size, self.img_size, device=device)
        self.generator_ema.train(was_training)
        return out.clamp_(-1.0, 1.0)


def build(model_name, task="gen", mixer="sa", size="micro", img_size=32, out_chans=3, z_dim=128, **kwargs):
    """Return the ``GAN`` of a mixer and backbone size (see the module docstring for the sizing rule)."""
    return GAN(mixer=mixer, img_size=img_size, out_chans=out_chans, z_dim=z_dim, **SIZES[size], **kwargs)
