"""The isotropic ViT-style trunk with a swappable token mixer.

Layout follows DeiT / timm ``VisionTransformer`` (conv patch embedding, cls token, learned position embedding,
pre-norm blocks, LayerNorm eps 1e-6, exact GELU, MLP ratio 4, final LayerNorm, head on the cls token), so
official ViT weights map one to one (``zoo.convert``). The mixer is injected as a class or a code (``zoo.mixers``)::

    tokens -> [Block: x + mixer(norm1(x)); x + mlp(norm2(x))] x depth -> norm -> head(cls)

The ``ff`` mixer keeps its paper's order and its own token LayerNorm::

    [Block: x + mlp(norm2(x)); x + mixer(x)]       (mixer = token LayerNorm + token MLP)
"""
import math

import torch
import torch.nn as nn
import torch.utils.checkpoint

from .. import mixers
from ..layers import DropPath, Mlp, PatchEmbed, resample_pos_embed
from ..layers.linear import _compiling

# name -> (embed_dim, depth, num_heads). ``micro`` trains on a 2-core CPU in minutes; ``mini`` is ``micro`` twice as
# wide (4x its parameters, 32-channel heads like every other size), the next step when ``micro`` underfits.
SIZES = {
    "micro": dict(embed_dim=64, depth=4, num_heads=2),
    "mini": dict(embed_dim=128, depth=4, num_heads=4),
    "tiny": dict(embed_dim=192, depth=12, num_heads=3),
    "small": dict(embed_dim=384, depth=12, num_heads=6),
    "base": dict(embed_dim=768, depth=12, num_heads=12),
}


class Block(nn.Module):
    """Pre-norm residual block: token mixer then channel MLP (or MLP then mixer for mixers with ``mixer_first``
    False, whose ``has_norm`` says they normalise their own input).

    Args:
        dim: Token width C.
        num_heads: Heads of the mixer.
        mixer: Mixer class (``zoo.mixers``' contract) or code (``sa``, ``ea``, ``effa``, ``ff``, or a registered one).
        num_tokens: Token count (needed by ``ff``).
        mlp_ratio: Hidden width of the channel MLP relative to C.
        drop_path: Stochastic depth rate of both residual branches.
        mixer_options: Extra keyword arguments of the mixer (e.g. ``memory_size`` for ``ea``).
    """

    def __init__(self, dim, num_heads, mixer="sa", num_tokens=None, mlp_ratio=4.0, drop=0.0, drop_path=0.0,
                 mixer_options=None):
        super().__init__()
        self.mixer = mixers.build(mixer, dim=dim, num_heads=num_heads, num_tokens=num_tokens,
                                  **(mixer_options or {}))
        self.mixer_first = getattr(self.mixer, "mixer_first", True)
        self.norm1 = nn.Identity() if getattr(self.mixer, "has_norm", False) else nn.LayerNorm(dim, eps=1e-6)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio), drop=drop)
        self.drop_path = DropPath(drop_path)

    def forward(self, x):
        if self.mixer_first:
            x = x + self.drop_path(self.mixer(self.norm1(x)))
            return x + self.drop_path(self.mlp(self.norm2(x)))
        x = x + self.drop_path(self.mlp(self.norm2(x)))
        return x + self.drop_path(self.mixer(self.norm1(x)))


def build_blocks(dim, depth, num_heads, mixer="sa", num_tokens=None, mlp_ratio=4.0, drop_rate=0.0,
                 drop_path_rate=0.0, mixer_options=None):
    """A ``nn.ModuleList`` of ``depth`` blocks with linearly increasing stochastic depth (for any tokenizer)."""
    dpr = torch.linspace(0, drop_path_rate, depth).tolist() if depth else []
    return nn.ModuleList(
        Block(dim, num_heads, mixer=mixer, num_tokens=num_tokens, mlp_ratio=mlp_ratio, drop=drop_rate,
              drop_path=dpr[i], mixer_options=mixer_options)
        for i in range(depth))


def init_trunk(module):
    """timm-style init of every layer in ``module``: trunc-normal(0.02) linears, zero biases, unit LayerNorms; then
    EA's official starting point M_v = M_k^T (the two memories are not tied afterwards). Shared by every task's
    trunk so all of them start from the same distribution."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    for m in module.modules():
        if isinstance(m, mixers.ExternalAttention):
            with torch.no_grad():
                m.linear_1.weight.copy_(m.linear_0.weight.t())


class GradCheckpointing:
    """timm's ``set_grad_checkpointing`` (mmseg's backbone ``with_cp``) for a module that runs ``blocks``: while
    autograd records, each block's activations are recomputed in the backward pass instead of stored
    (``torch.utils.checkpoint``, non-reentrant). Training memory then holds the block inputs instead of every
    intermediate, for one more forward of each block. The RNG state is replayed, so dropout and drop path draw the
    same masks and the gradients are those of the plain run. Inference (no grad) is unaffected."""

    grad_checkpointing = False

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable=True):
        self.grad_checkpointing = bool(enable)
        return self

    def _run_block(self, block, x):
        if self.grad_checkpointing and torch.is_grad_enabled():
            return torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
        return block(x)


class TokenTrunk(GradCheckpointing, nn.Module):
    """timm's model surface for a tokenizer + ``blocks`` + ``norm`` + ``head`` classifier (shared by the ``vit`` and
    ``t2t`` families): ``forward_features``, ``forward_head``, ``forward_intermediates``, ``reset_classifier``,
    ``set_grad_checkpointing``.

    A subclass defines ``_embed(x) -> (tokens (B, prefix + N, D), (h, w))`` and the attributes ``blocks``, ``norm``,
    ``head``, ``head_drop``, ``cls_token`` (or ``None``), ``num_prefix_tokens`` and ``embed_dim``.
    """

    def forward_features(self, x):
        """(B, C, H, W) -> normalised tokens (B, prefix + N, D)."""
        x, hw = self._embed(x)
        for blk in self.blocks:
            x = self._run_block(blk, x)
        return self.norm(x)

    def forward_head(self, x, pre_logits=False):
        """Pool (cls token, else mean of patch tokens) and classify."""
        x = x[:, 0] if self.cls_token is not None else x.mean(dim=1)
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x):
        return self.forward_head(self.forward_features(x))

    def forward_intermediates(self, x, indices=None, norm=False, output_fmt="NCHW", intermediates_only=False):
        """Run the trunk and return the outputs of selected blocks.

        Args:
            x: Images (B, C, H, W).
            indices: Block indices (0-based, negatives count from the end), or an int n for the last n blocks;
                default all blocks.
            norm: Apply the final LayerNorm to each intermediate.
            output_fmt: ``NCHW`` (patch tokens as maps) or ``NLC`` (tokens, prefix tokens dropped).
            intermediates_only: Return only the list of intermediates.

        Returns:
            ``intermediates`` or ``(final_tokens, intermediates)``.
        """
        depth = len(self.blocks)
        if indices is None:
            take = list(range(depth))
        elif isinstance(indices, int):
            take = list(range(depth - indices, depth))
        else:
            take = [i % depth if -depth <= i < depth else _bad_index(i, depth) for i in indices]
        if output_fmt not in ("NCHW", "NLC"):
            raise ValueError(f"output_fmt must be 'NCHW' or 'NLC', got {output_fmt!r}")
        B = x.shape[0]
        x, hw = self._embed(x)
        out = []
        last = max(take) if intermediates_only else depth - 1
        for i, blk in enumerate(self.blocks[:last + 1]):
            x = self._run_block(blk, x)
            if i in take:
                y = (self.norm(x) if norm else x)[:, self.num_prefix_tokens:]
                out.append(y.transpose(1, 2).reshape(B, -1, *hw) if output_fmt == "NCHW" else y)
        if intermediates_only:
            return out
        return self.norm(x), out

    def reset_classifier(self, num_classes):
        """Replace the head with a fresh one for ``num_classes`` (0 removes it)."""
        self.num_classes = num_classes
        self.head = nn.Linear(self.embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        if num_classes > 0:
            nn.init.trunc_normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)



class VisionTransformer(TokenTrunk):
    """Image classifier over the mixer trunk (DeiT layout).

    Args:
        mixer: Mixer code.
        img_size: Input size (int or (H, W)). Models with a fixed token count (``ff``) accept only this size.
        patch_size: Patch side.
        in_chans: Input channels.
        num_classes: Classes of the head (0: no head, ``forward`` returns pooled features).
        embed_dim, depth, num_heads: Trunk size (see ``SIZES``).
        mlp_ratio: Channel MLP expansion.
        class_token: Prepend a cls token (pooled by the head); else the head averages the patch tokens.
        drop_rate, drop_path_rate: Dropout and stochastic depth.
        mixer_options: Extra keyword arguments of the mixer.
    """

    def __init__(self, mixer="sa", img_size=224, patch_size=16, in_chans=3, num_classes=1000, embed_dim=768,
                 depth=12, num_heads=12, mlp_ratio=4.0, class_token=True, drop_rate=0.0, drop_path_rate=0.0,
                 mixer_options=None):
        super().__init__()
        self.mixer_name = mixer
        self.num_classes = num_classes
        self.num_features = self.embed_dim = embed_dim
        self.num_prefix_tokens = 1 if class_token else 0
        # A mixer whose weights are shaped by N (``ff``) refuses other input sizes at the patch embedding.
        fixed_tokens = getattr(mixers.get(mixer), "fixed_tokens", False)
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim, strict=fixed_tokens)
        num_tokens = self.patch_embed.num_patches + self.num_prefix_tokens
        self.num_tokens = num_tokens
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim)) if class_token else None
        self.pos_embed = nn.Parameter(torch.zeros(1, num_tokens, embed_dim))
        self.pos_drop = nn.Dropout(drop_rate)
        self.blocks = build_blocks(embed_dim, depth, num_heads, mixer=mixer, num_tokens=num_tokens,
                                   mlp_ratio=mlp_ratio, drop_rate=drop_rate, drop_path_rate=drop_path_rate,
                                   mixer_options=mixer_options)
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        reduction = self.patch_embed.patch_size[0]
        self.feature_info = [dict(num_chs=embed_dim, reduction=reduction, module=f"blocks.{i}") for i in range(depth)]
        self.init_weights()

    # -- initialisation ---------------------------------------------------------------------------------------
    def init_weights(self):
        """timm-style init: trunc-normal(0.02) linears and embeddings, zero biases, unit LayerNorms."""
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        if self.cls_token is not None:
            nn.init.normal_(self.cls_token, std=1e-6)
        init_trunk(self)
        w = self.patch_embed.proj.weight
        nn.init.trunc_normal_(w.view(w.shape[0], -1), std=math.sqrt(1.0 / w[0].numel()))

    @torch.jit.ignore
    def no_weight_decay(self):
        """Parameter names excluded from weight decay (position embedding and cls token)."""
        return {"pos_embed", "cls_token"}

    def set_input_size(self, img_size):
        """Make ``img_size`` the native input size (timm's ``set_input_size``): the position embedding is resampled
        bicubically to its grid once, instead of at every forward. A mixer whose weights are sized by the token
        count (``ff``) cannot change it."""
        pe = self.patch_embed
        old_size, old_grid = pe.img_size, pe.grid_size
        pe.set_img_size(img_size)
        if pe.grid_size == old_grid:
            return
        if pe.strict:
            new_size = pe.img_size
            pe.set_img_size(old_size)
            raise ValueError(f"the {self.mixer_name} mixer's weights are sized by the token count ({self.num_tokens} "
                             f"tokens at {old_size[0]}x{old_size[1]}), so the model cannot take "
                             f"{new_size[0]}x{new_size[1]} inputs; resize the images to {old_size[0]}x{old_size[1]}")
        with torch.no_grad():
            pos = resample_pos_embed(self.pos_embed.detach(), pe.grid_size, self.num_prefix_tokens, old_grid)
        self.pos_embed = nn.Parameter(pos.contiguous())
        self.num_tokens = pe.num_patches + self.num_prefix_tokens

    # -- forward ----------------------------------------------------------------------------------------------
    def _embed(self, x):
        x, hw = self.patch_embed(x)
        pos = self.pos_embed if hw == self.patch_embed.grid_size else self._resampled_pos_embed(hw)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.pos_drop(x + pos), hw

    def _resampled_pos_embed(self, hw):
        """The position embedding resampled to the token grid ``hw``. Without autograd the result is kept for the
        next call at the same grid (an image size the model was not built for, e.g. each 1024-pixel image of a
        512-crop segmentor: one bicubic resample per model, not per forward). The kept copy belongs to this very
        ``pos_embed`` tensor: a new parameter, a ``.data`` swap, an in-place change (``load_state_dict``, an
        optimizer step) or another dtype, device or grid resamples again."""
        p = self.pos_embed
        if torch.is_grad_enabled() or _compiling():  # autograd needs the graph; tracing, no Python state
            return resample_pos_embed(p, hw, self.num_prefix_tokens, self.patch_embed.grid_size)
        key = (p.data_ptr(), p._version, tuple(hw), torch.is_inference_mode_enabled())
        kept = self.__dict__.get("_pos_kept")
        if kept is None or kept[0] is not p or kept[1] != key:
            pos = resample_pos_embed(p.detach(), hw, self.num_prefix_tokens, self.patch_embed.grid_size)
            kept = self.__dict__["_pos_kept"] = (p, key, pos)  # a plain attribute: not in the state dict
        return kept[2]


def _bad_index(i, depth):
    raise IndexError(f"block index {i} is out of range for a trunk of depth {depth}")
