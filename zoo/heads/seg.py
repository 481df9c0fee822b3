"""Semantic segmentation: the zoo trunk as an mmsegmentation backbone inside UPerNet.

The recipe is mmseg's DeiT + UPerNet for ADE20K (``configs/vit/vit_deit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py``;
Xiao et al., "Unified Perceptual Parsing for Scene Understanding", ECCV 2018, https://arxiv.org/abs/1807.10221;
Touvron et al., DeiT, https://arxiv.org/abs/2012.12877) with the token mixer swapped::

    image (B, 3, H, W)
      -> ZooViTBackbone: zoo trunk, outputs of 4 blocks (2, 5, 8, 11 of 12) as maps (B, D, H/16, W/16)
      -> MultiLevelNeck: rescale x4, x2, x1, x0.5 -> (B, D, H/4 .. H/32)
      -> UPerHead (PPM pool scales 1, 2, 3, 6; 512 channels)        -> logits (B, K, H/4, W/4)
         FCNHead on level 3 (256 channels, loss weight 0.4, training only)
      -> bilinear resize to the input size

The light head (``decode_head="segformer"``, configs ``segformerhead_*``) replaces neck and heads with BEiT's
``Feature2Pyramid`` (x2 transposed conv, x1, x0.5 and x0.25 max-pool -> H/8 .. H/64) and SegFormer's all-MLP
``SegformerHead`` (1x1 convs to 128 channels, fused at H/8; Xie et al., https://arxiv.org/abs/2105.15203), without an
auxiliary head: the head costs ~1% of UPerNet's at 1024 px, so the mixer's cost decides the model's.

``ZooEncoderDecoder`` is an mmseg ``EncoderDecoder``: ``loss`` / ``predict`` take ``SegDataSample`` lists as in
mmseg, and calling it on a tensor returns per-pixel logits (B, K, H, W) at the input resolution (through the
configured whole/slide inference). Inputs are RGB normalised with the ImageNet mean/std (the ``data_preprocessor``
does this from raw BGR images inside the mmengine Runner).

``ff`` models have a fixed token count: they train at the crop size ``img_size`` and infer with mmseg's sliding
window at that crop (``zoo.load`` sets ``test_cfg.mode='slide'`` for them); a whole-image input larger than the crop
is refused with an error that says so. Inputs smaller than the crop (or, for other mixers, not divisible by the
patch size) are zero-padded at the bottom/right and the logits cropped back.

Weights loaded into a segmentor (``zoo.load(checkpoint=...)``, ``load_state_dict``, mmengine's ``load_checkpoint``) or
into its backbone (``backbone_checkpoint=``) are never overwritten by a later ``init_weights()`` (the Runner calls it).

This module imports mmseg, so it is imported lazily (``zoo.load(..., task='seg')``); ``import zoo`` stays light.
"""
try:  # mmseg is the `seg` extra, not a base dependency: say which extra before anything deeper fails
    import mmengine  # noqa: F401
    import mmseg  # noqa: F401  (imports mmcv and checks its version)
except ImportError as _e:
    raise ImportError(f"task 'seg' needs mmsegmentation, mmengine and mmcv (no module named {_e.name!r}): "
                      f"pip install 'zoo[seg]'  (or 'zoo[train]' to also train)", name=_e.name) from None

import copy
import logging
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import _mmcv_compat

_mmcv_compat.install()  # before mmseg: it imports mmcv.ops, whose compiled extension mmcv-lite lacks

from mmengine.config import ConfigDict  # noqa: E402
from mmengine.logging import MMLogger  # noqa: E402
from mmengine.model import BaseModule  # noqa: E402
from mmengine.registry import DefaultScope  # noqa: E402
from mmengine.structures import PixelData  # noqa: E402
from mmseg.models.segmentors import EncoderDecoder  # noqa: E402
from mmseg.registry import MODELS as SEG_MODELS  # noqa: E402
from mmseg.structures import SegDataSample  # noqa: E402
from mmseg.utils import add_prefix  # noqa: E402

from .. import mixers  # noqa: E402
from ..backbones.vit import SIZES, VisionTransformer  # noqa: E402
from ..features import default_out_indices  # noqa: E402
from ..layers.affinity import AffinityHead, item_mask, offsets_within, random_walk  # noqa: E402
from ..layers.patch_embed import adapt_in_chans  # noqa: E402
from ..layers.resize_argmax import resize_argmax  # noqa: E402
from ..registry import model_info  # noqa: E402
from .light_head import head_forward  # noqa: E402
from .seg_loss import head_loss  # noqa: E402

# ImageNet statistics on the 0..255 scale, as mmseg's ViT configs (images are read as BGR and converted to RGB).
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def _pair(v):
    return tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v), int(v))


def slide_stride(crop):
    """mmseg's sliding-window stride for a crop: two thirds of it (341 for 512)."""
    return tuple(int(c) * 2 // 3 for c in _pair(crop))


def slide_windows(size, crop, stride):
    """mmseg's sliding windows over an image of ``size`` (h, w): ``[(y1, y2, x1, x2), ...]`` row by row. Each window
    is ``crop`` (or the whole side where the image is smaller), the last of a row or column ends at the border.

    Raises:
        ValueError: a stride larger than the crop, which would leave pixels that no window covers.
    """
    (h, w), (ch, cw), (sh, sw) = _pair(size), _pair(crop), _pair(stride)
    if sh > ch or sw > cw or sh < 1 or sw < 1:
        raise ValueError(f"test_cfg stride {(sh, sw)} must be between 1 and the crop {(ch, cw)} on each side, or "
                         f"some pixels get no window; mmseg's default is two thirds of the crop: {slide_stride((ch, cw))}")
    rows = [(max(min(i * sh + ch, h) - ch, 0), min(i * sh + ch, h)) for i in range(max(h - ch + sh - 1, 0) // sh + 1)]
    cols = [(max(min(j * sw + cw, w) - cw, 0), min(j * sw + cw, w)) for j in range(max(w - cw + sw - 1, 0) // sw + 1)]
    return [(y1, y2, x1, x2) for y1, y2 in rows for x1, x2 in cols]


def embed_dim_of(name):
    """Token width D of a registered model name (from the registry, never repeated in configs)."""
    return SIZES[model_info(name)["size"]]["embed_dim"]


def is_fixed_tokens(name):
    """True for mixers whose weights are shaped by the token count (``ff``)."""
    return bool(getattr(mixers.get(model_info(name)["mixer"]), "fixed_tokens", False))


@SEG_MODELS.register_module()
class ZooViTBackbone(BaseModule):
    """A registered zoo trunk as an mmseg backbone: intermediate block outputs as NCHW maps.

    Args:
        name: Registered model name, e.g. ``ea_vit_base``; mixer and size come from the registry.
        img_size: Training crop (int or (H, W)). Position embeddings are resampled for other sizes, except for
            fixed-token mixers (``ff``), which accept exactly this size.
        patch_size: Patch side.
        in_chans: Input channels.
        out_indices: Block indices returned (default: 4 spread evenly, (2, 5, 8, 11) for 12 blocks).
        drop_rate: Dropout in the trunk.
        drop_path_rate: Stochastic depth (0.1 in mmseg's DeiT recipe).
        checkpoint: Optional classification checkpoint for the trunk (zoo safetensors, timm/DeiT, official FF;
            anything ``zoo.convert`` reads); its head and final norm are dropped, position embeddings resampled.
        pretrained: Alias of ``checkpoint`` (what mmseg's ``EncoderDecoder(pretrained=...)`` passes down).
        mixer_options: Extra mixer arguments.
        final_norm: Apply the trunk's final LayerNorm to the last block's output (mmseg's ViT ``final_norm=True``,
            its ``-ln`` configs); default off, as mmseg's default and its DeiT ``_mln_`` configs.
        class_token: Run the trunk with a cls token (mmseg's ``with_cls_token``, default True); the token is
            dropped from the maps either way.
        init_cfg: ``dict(type='Pretrained', checkpoint=WEIGHTS, skip=[...])`` starts the trunk from classification
            weights when training begins (``init_weights``, which the Runner calls; building a model for testing
            loads nothing), as mmseg's ``init_cfg`` does. ``WEIGHTS`` is anything ``checkpoint`` takes or a
            pretrained tag (``sa_vit_base.cls_in1k``: resolved, downloaded and converted like ``zoo.load``).
            ``skip`` lists trunk keys (fnmatch patterns, e.g. ``blocks.*.mixer.*``) that keep their fresh
            initialisation: ``ff``'s token-mixing layers are shaped by the token count, so a 224-pixel ImageNet
            model cannot fill them at a 512 crop. Anything else is loaded strictly.
        with_cp: Gradient checkpointing of the trunk's blocks in training (mmseg's ``with_cp``; the trunk's
            ``set_grad_checkpointing``): less memory for one more forward of each block.
    """

    def __init__(self, name, img_size=512, patch_size=16, in_chans=3, out_indices=None, drop_rate=0.0,
                 drop_path_rate=0.0, checkpoint=None, pretrained=None, mixer_options=None, final_norm=False,
                 class_token=True, init_cfg=None, with_cp=False):
        super().__init__(init_cfg=init_cfg)
        info = model_info(name)
        self.name = name
        self.img_size = _pair(img_size)
        self.patch_size = _pair(patch_size)
        self.in_chans = in_chans
        self.fixed_tokens = is_fixed_tokens(name)
        self.trunk = VisionTransformer(mixer=info["mixer"], img_size=self.img_size, patch_size=patch_size,
                                       in_chans=in_chans, num_classes=0, drop_rate=drop_rate,
                                       drop_path_rate=drop_path_rate, mixer_options=mixer_options,
                                       class_token=class_token, **SIZES[info["size"]])
        self.trunk.set_grad_checkpointing(with_cp)
        self.final_norm = bool(final_norm)
        self.class_token = bool(class_token)
        if not self.final_norm:
            # Intermediates are taken before the final LayerNorm (mmseg's ViT with final_norm=False); removing the
            # unused norm keeps every parameter in the graph (DDP would otherwise need find_unused_parameters).
            self.trunk.norm = nn.Identity()
        depth = len(self.trunk.blocks)
        self.out_indices = [i % depth for i in out_indices] if out_indices is not None else default_out_indices(depth)
        if self.final_norm and depth - 1 not in self.out_indices:
            raise ValueError(f"final_norm=True normalises the last block's output, which out_indices="
                             f"{self.out_indices} does not return (the norm would get no gradient)")
        self.embed_dim = self.trunk.embed_dim
        # Maps as channels-last views of the tokens (no copy; the necks' and heads' convs run fastest in that layout
        # on a CPU) instead of contiguous NCHW copies. Off by default: some mmseg heads call .view on their inputs.
        # ZooEncoderDecoder turns it on when its neck and heads are in CHANNELS_LAST_SAFE.
        self.channels_last_maps = False
        checkpoint = checkpoint or pretrained
        if checkpoint:
            self.load_classification_checkpoint(checkpoint)

    def load_classification_checkpoint(self, checkpoint, skip=()):
        """Load a classification checkpoint into the trunk (head and final norm dropped, strict otherwise).

        Args:
            checkpoint: A weights file or folder ``zoo.convert`` reads, a state dict, or a pretrained tag.
            skip: fnmatch patterns of trunk keys that keep their current values (see the class's ``init_cfg``).
        """
        from .. import convert
        sd = self._classification_state_dict(checkpoint)
        # The classifier head is not used for dense maps; the final norm is kept only for final_norm=True (mmseg's
        # DeiT conversion starts its final norm from the classifier's, too).
        dropped = ("head.", "head_dist.", "fc_norm.") + (() if self.final_norm else ("norm.",))
        sd = {k: v for k, v in sd.items() if not k.startswith(dropped)}
        sd = self._fit_in_chans(sd, checkpoint)
        if skip:
            sd = self._skip_keys(sd, skip, checkpoint)
        convert.load_checkpoint(self.trunk, sd, drop_head=True, drop_distillation=True)
        self._is_init = True  # loaded weights: init_weights must not touch them
        return self

    def set_input_size(self, img_size):
        """Make ``img_size`` the training crop: the trunk's position embedding is resampled to its grid
        (``VisionTransformer.set_input_size``; ``ff`` refuses, its weights are sized by the token count)."""
        self.trunk.set_input_size(img_size)
        self.img_size = self.trunk.patch_embed.img_size

    @staticmethod
    def _classification_state_dict(checkpoint):
        from .. import convert
        if isinstance(checkpoint, dict):
            return convert.unwrap(checkpoint)
        from ..pretrained import looks_like_tag
        if looks_like_tag(checkpoint) and "/" not in checkpoint and not os.path.exists(checkpoint):
            import torch

            from ..factory import load
            # Resolved, downloaded and converted once, like zoo.load. The classifier it builds first draws its own
            # random init: under fork_rng those draws leave the global generator as they found it, so a training
            # that names its start by tag draws the same head init and augmentation as one that names the folder.
            with torch.random.fork_rng(devices=[]):
                return load(checkpoint).state_dict()
        return convert.read_state_dict(checkpoint)

    def _fit_in_chans(self, sd, checkpoint):
        """A classifier's patch embedding fitted to this trunk's channels (grey-scale to colour or the reverse,
        ``zoo.layers.adapt_in_chans``); any other channel change is an error."""
        key = "patch_embed.proj.weight"
        w = sd.get(key)
        if w is None or w.ndim != 4 or w.shape[1] == self.in_chans:
            return sd
        try:
            w = adapt_in_chans(w, self.in_chans)
        except ValueError as e:
            raise ValueError(f"{checkpoint}: {e}") from None
        logging.getLogger(__name__).info("%s: patch embedding adapted from %d to %d input channels", self.name,
                                         sd[key].shape[1], self.in_chans)
        return {**sd, key: w}

    def _skip_keys(self, sd, skip, checkpoint):
        """``sd`` (zoo layout) with the ``skip`` keys replaced by the trunk's own values; the position embedding
        is resampled to this trunk's grid (``ff`` trunks are otherwise refused a grid change)."""
        from fnmatch import fnmatch

        from .. import convert
        layout = convert.detect_layout(sd)
        if layout != "zoo":
            raise ValueError(f"init_cfg skip={list(skip)} names zoo trunk keys, but {checkpoint} is in the "
                             f"{layout} layout; give a pretrained tag or zoo weights instead.")
        own = self.trunk.state_dict()
        kept = [k for k in own if any(fnmatch(k, p) for p in skip)]
        if not kept:
            raise ValueError(f"init_cfg skip={list(skip)} matches no key of the {self.name} trunk "
                             f"(e.g. {', '.join(list(own)[:4])})")
        sd = {k: v for k, v in sd.items() if k not in kept}
        sd.update({k: own[k] for k in kept})
        if "pos_embed" in sd and "pos_embed" not in kept and sd["pos_embed"].shape != own["pos_embed"].shape:
            sd["pos_embed"] = convert._fit_pos_embed(sd["pos_embed"], self.trunk)
        logging.getLogger(__name__).info("%s: %d trunk tensors keep their initialisation (%s)", self.name,
                                         len(kept), ", ".join(skip))
        return sd

    def init_weights(self):
        """Load ``init_cfg``'s ``Pretrained`` weights into the trunk, once; otherwise a no-op (the trunk initialised
        itself at construction, timm's init, and weights loaded since must survive)."""
        cfg = dict(self.init_cfg or {})
        if not self._is_init and cfg:
            if cfg.get("type") != "Pretrained" or not cfg.get("checkpoint"):
                raise ValueError(f"ZooViTBackbone init_cfg takes dict(type='Pretrained', checkpoint=..., skip=[...]) "
                                 f"only, got {cfg}")
            self.load_classification_checkpoint(cfg["checkpoint"], skip=tuple(cfg.get("skip", ())))
        self._is_init = True

    def forward(self, x):
        """(B, C, H, W) -> tuple of ``len(out_indices)`` maps (B, D, ceil(H/p), ceil(W/p))."""
        H, W = x.shape[-2:]
        if self.fixed_tokens and (H, W) != self.img_size:
            raise ValueError(
                f"{self.name} has a fixed token count and takes {self.img_size[0]}x{self.img_size[1]} inputs only, "
                f"got {H}x{W}. Train at crop size {self.img_size} (data_preprocessor size=crop_size) and test with "
                f"sliding-window inference at that crop: test_cfg=dict(mode='slide', crop_size={self.img_size}, "
                f"stride={slide_stride(self.img_size)}).")
        ph, pw = self.patch_size
        pad_h, pad_w = (-H) % ph, (-W) % pw
        if pad_h or pad_w:  # bottom/right zero padding, as mmseg's ViT ("corner" padding)
            x = F.pad(x, (0, pad_w, 0, pad_h))
        gh, gw = (H + pad_h) // ph, (W + pad_w) // pw
        feats = self.trunk.forward_intermediates(x, indices=self.out_indices, norm=False, output_fmt="NLC",
                                                 intermediates_only=True)
        last = len(self.trunk.blocks) - 1
        outs = []
        for i, f in zip(sorted(set(self.out_indices)), feats):
            if self.final_norm and i == last:  # mmseg normalises the last layer's tokens before taking outputs
                f = self.trunk.norm(f)
            if self.channels_last_maps:  # a view of the tokens: no copy
                outs.append(f.reshape(f.shape[0], gh, gw, -1).permute(0, 3, 1, 2))
            else:
                outs.append(f.transpose(1, 2).reshape(f.shape[0], -1, gh, gw).contiguous())
        by_index = dict(zip(sorted(set(self.out_indices)), outs))
        return tuple(by_index[i] for i in self.out_indices)


def _as_config(cfg):
    """A ConfigDict copy (never the caller's object: the defaults filled in below must not leak into configs)."""
    return None if cfg is None else ConfigDict(copy.deepcopy(cfg.to_dict() if isinstance(cfg, ConfigDict) else cfg))


# Necks and heads (mmseg classes, by exact name) that take channels-last maps as they take NCHW ones: convs, pools,
# resizes and concatenations only. With them the backbone hands over views of its tokens instead of copies
# (tests/test_seg.py; the bundled UPerNet checkpoints score their cards exactly either way).
CHANNELS_LAST_SAFE = ("Feature2Pyramid", "MultiLevelNeck", "SegformerHead", "UPerHead", "FCNHead")


@SEG_MODELS.register_module()
class ZooEncoderDecoder(EncoderDecoder):
    """mmseg ``EncoderDecoder`` over a ``ZooViTBackbone`` (see the module docstring for the call graph).

    Channel widths of the neck and heads default to the backbone's width (from the registry), so configs do not
    repeat architecture numbers. Arguments are those of ``EncoderDecoder``, plus:

    Args:
        padded_logits: What happens to the logits of an input the backbone had to pad (a side not a multiple of the
            patch, e.g. a 512x683 ADE20K test image): ``"crop"`` (default) resizes them to the padded size and
            crops the padding off, so every logit stays over its own pixel; ``"stretch"`` resizes the padded grid's
            logits straight to the input size, as mmseg's ``EncoderDecoder`` does (its ViT pads inside the
            backbone). Use ``"stretch"`` to reproduce mmseg's numbers with mmseg's weights.
        refine: None, or a dict of ``REFINE_DEFAULTS``' keys: an ``AffinityHead`` (``affinity_head``, trained on the
            frozen segmentor by ``python -m tasks.seg.affinity``) predicts from the normalised image and the decode
            head's features whether neighbouring pixels share a class, and at inference the class probabilities
            walk ``steps`` steps along ``affinity ** beta`` (``zoo.layers.affinity``, Chebyshev-evaluated within
            ``tol``) over the pixels the segmentor does not call ``background`` (None: over every pixel). The
            outputs of inference are then those probabilities (``refined_probs``), not logits; the labels are their
            argmax. ``use_refine = False`` turns it off (the segmentor's own logits).
    """

    PADDED_LOGITS = ("crop", "stretch")
    REFINE_DEFAULTS = dict(channels=32, radius=1, beta=32, steps=800, tol=1e-5, background=0)

    def __init__(self, backbone, decode_head, neck=None, auxiliary_head=None, train_cfg=None, test_cfg=None,
                 data_preprocessor=None, pretrained=None, init_cfg=None, padded_logits="crop", refine=None):
        if padded_logits not in self.PADDED_LOGITS:
            raise ValueError(f"padded_logits must be one of {self.PADDED_LOGITS}, got {padded_logits!r}")
        backbone = _as_config(backbone)
        if backbone.get("type", "ZooViTBackbone") not in ("ZooViTBackbone", ZooViTBackbone):
            raise ValueError(f"ZooEncoderDecoder needs backbone type ZooViTBackbone, got {backbone['type']!r}")
        dim = embed_dim_of(backbone["name"])
        num_outs = len(backbone.get("out_indices") or [0] * 4)
        neck, decode_head, auxiliary_head = _as_config(neck), _as_config(decode_head), _as_config(auxiliary_head)
        if neck is not None and neck.get("type") == "Feature2Pyramid":  # one width for every level
            neck.setdefault("embed_dim", dim)
        elif neck is not None:
            neck.setdefault("in_channels", [dim] * num_outs)
            neck.setdefault("out_channels", dim)
        # one width per map the head reads (its in_index), which may be fewer than the trunk returns
        in_index = decode_head.get("in_index")
        decode_head.setdefault("in_channels", [dim] * (len(in_index) if isinstance(in_index, (list, tuple))
                                                       else num_outs))
        if auxiliary_head is not None:
            auxiliary_head.setdefault("in_channels", dim)
        test_cfg = _as_config(test_cfg) if test_cfg is not None else ConfigDict(mode="whole")
        super().__init__(backbone=backbone, decode_head=decode_head, neck=neck, auxiliary_head=auxiliary_head,
                         train_cfg=_as_config(train_cfg) or ConfigDict(), test_cfg=test_cfg,
                         data_preprocessor=data_preprocessor, pretrained=pretrained, init_cfg=init_cfg)
        self.padded_logits = padded_logits
        self._extra_zoo_args = {}
        consumers = [self.decode_head, *(head for _, head in self._aux_heads())]
        consumers += [self.neck] if self.with_neck else []
        self.backbone.channels_last_maps = all(type(m).__name__ in CHANNELS_LAST_SAFE for m in consumers)
        self.refine, self.use_refine = None, False
        if refine is not None:
            unknown = set(refine) - set(self.REFINE_DEFAULTS)
            if unknown:
                raise ValueError(f"refine takes {sorted(self.REFINE_DEFAULTS)}, got unknown {sorted(unknown)}")
            self.refine = {**self.REFINE_DEFAULTS, **dict(refine)}
            self.affinity_head = AffinityHead(self.decode_head.channels, self.refine["channels"],
                                              self.backbone.in_chans, offsets_within(self.refine["radius"]))
            self.use_refine = True

    # -- training -------------------------------------------------------------------------------------------------
    # The heads' losses without the full-resolution logits (zoo.heads.seg_loss): mmseg's loss dict to float
    # rounding, a fraction of the memory at high resolution. False runs mmseg's head.loss.
    low_memory_loss = True

    def _decode_head_forward_train(self, inputs, data_samples):
        return add_prefix(head_loss(self.decode_head, inputs, data_samples, self.train_cfg, self.low_memory_loss),
                          "decode")

    def _aux_heads(self):
        """``[(index or None, head)]``: the auxiliary heads (mmseg takes one head or a ModuleList of them)."""
        heads = self.auxiliary_head if self.with_auxiliary_head else nn.ModuleList()
        return list(heads.named_children()) if isinstance(heads, nn.ModuleList) else [(None, heads)]

    def _auxiliary_head_forward_train(self, inputs, data_samples):
        losses = {}
        for idx, head in self._aux_heads():
            loss = head_loss(head, inputs, data_samples, self.train_cfg, self.low_memory_loss)
            losses.update(add_prefix(loss, "aux" if idx is None else f"aux_{idx}"))
        return losses

    # -- the zoo surface ------------------------------------------------------------------------------------------
    def set_grad_checkpointing(self, enable=True):
        """Gradient checkpointing of the trunk's blocks (timm's name; the backbone's ``with_cp``)."""
        self.backbone.trunk.set_grad_checkpointing(enable)
        return self

    def set_input_size(self, img_size):
        """Make ``img_size`` the training crop: the trunk's position embedding is resampled to its grid and the data
        preprocessor pads training images to it (``ff`` refuses: its weights are sized by the token count)."""
        self.backbone.set_input_size(img_size)
        if getattr(self.data_preprocessor, "size", None) is not None:
            self.data_preprocessor.size = tuple(self.backbone.img_size)
        return self

    def reset_classifier(self, num_classes):
        """Fresh ``conv_seg`` classifiers for ``num_classes`` in the decode and auxiliary heads (everything else is
        kept), initialised as mmseg initialises them (normal, std 0.01, zero bias)."""
        for head in [self.decode_head, *(head for _, head in self._aux_heads())]:
            old = head.conv_seg
            head.conv_seg = nn.Conv2d(old.in_channels, num_classes, kernel_size=1).to(old.weight)
            nn.init.normal_(head.conv_seg.weight, std=0.01)
            nn.init.zeros_(head.conv_seg.bias)
            head.num_classes = head.out_channels = num_classes
        self.num_classes = self.out_channels = num_classes

    @property
    def zoo_model(self):
        """The ``nn.Module`` that ``zoo.load(..., task='seg')`` returns: this segmentor itself."""
        return self

    @property
    def zoo_config(self):
        """Plain-JSON description that rebuilds this architecture: ``zoo.load(name, task='seg', **args)``."""
        bb = self.backbone
        h, w = bb.img_size
        args = dict(num_classes=int(self.num_classes), img_size=h if h == w else [h, w],
                    patch_size=bb.patch_size[0], in_chans=bb.in_chans, channels=int(self.decode_head.channels),
                    aux_channels=int(self.auxiliary_head.channels) if self.with_auxiliary_head else 0)
        head = next((k for k, v in DECODE_HEADS.items() if v == type(self.decode_head).__name__), None)
        if head is not None and head != "uper":
            args["decode_head"] = head
        # The neck's rescaling is part of the architecture (no weights show it): record it when it is not the head's
        # default, so that zoo.load rebuilds the maps the head was trained on.
        scales = neck_scales_of(self.neck) if self.with_neck else None
        if head is not None and scales is not None and scales != NECK_SCALES[head]:
            args["neck_scales"] = scales
        if self.with_auxiliary_head and not isinstance(self.auxiliary_head, nn.ModuleList):
            if self.auxiliary_head.in_index != 3:  # which map the auxiliary head reads: weights do not show it
                args["aux_index"] = int(self.auxiliary_head.in_index)
        # mmseg-compatibility switches, recorded only when they differ from the zoo's defaults
        for key, value, default in (("final_norm", bb.final_norm, False), ("class_token", bb.class_token, True),
                                    ("padded_logits", self.padded_logits, "crop"), ("refine", self.refine, None),
                                    ("out_indices", list(bb.out_indices), default_out_indices(len(bb.trunk.blocks)))):
            if value != default:
                args[key] = value
        args.update(self._extra_zoo_args)
        return dict(name=bb.name, task="seg", args=args)

    @zoo_config.setter
    def zoo_config(self, value):
        # ``zoo.registry.build`` records the build kwargs; keep the JSON ones that are not load-time options.
        if value.get("name") not in (None, self.backbone.name):
            raise ValueError(f"zoo_config names {value.get('name')!r} but the backbone is {self.backbone.name!r}")
        load_only = {"backbone_checkpoint"}
        self._extra_zoo_args = {k: v for k, v in value.get("args", {}).items()
                                if k not in load_only and isinstance(v, (int, float, str, bool, list, type(None)))}

    # -- weights --------------------------------------------------------------------------------------------------
    def _load_from_state_dict(self, *args, **kwargs):
        # Both torch's load_state_dict and mmengine's load_checkpoint pass through here: after weights are loaded,
        # a later init_weights() (the Runner calls it) must be a no-op.
        super()._load_from_state_dict(*args, **kwargs)
        self._is_init = True

    # -- inference ------------------------------------------------------------------------------------------------
    def _fit_size(self, H, W):
        """Size the backbone is run at for an (H, W) input: the crop for fixed-token models, else patch multiples."""
        bb = self.backbone
        if bb.fixed_tokens:
            ch, cw = bb.img_size
            if H > ch or W > cw:
                raise ValueError(
                    f"{bb.name} has a fixed token count: one forward pass covers at most {ch}x{cw} pixels, got "
                    f"{H}x{W}. Use sliding-window inference at the crop size: test_cfg=dict(mode='slide', "
                    f"crop_size=({ch}, {cw}), stride={slide_stride(bb.img_size)}) (zoo.load sets it for ff models).")
            return ch, cw
        ph, pw = bb.patch_size
        return math.ceil(H / ph) * ph, math.ceil(W / pw) * pw

    def _head_logits(self, inputs, feats=None):
        """Head logits at the head's stride for ``inputs`` (padded to what the backbone takes), channels-last.

        Args:
            feats: A list, or None; a list gets the padded input and the decode head's features (the input of its
                ``conv_seg`` classifier) appended.

        Returns:
            ``(logits, resize_to, (H, W))``: encode_decode's logits are ``logits`` bilinearly resized to ``resize_to``
            and cut to the top-left ``(H, W)``, the input size.
        """
        H, W = inputs.shape[-2:]
        th, tw = self._fit_size(H, W)
        if (th, tw) != (H, W):
            inputs = F.pad(inputs, (0, tw - W, 0, th - H))  # bottom/right, zero = the mean colour after normalising
        # (B, K, th/4, tw/4); the light head's fusion conv runs before its resize at inference (zoo.heads.light_head)
        if feats is None:
            logits = head_forward(self.decode_head, self.extract_feat(inputs))
        else:
            feats.append(inputs)
            hook = self.decode_head.conv_seg.register_forward_hook(lambda mod, args, out: feats.append(args[0]))
            try:
                logits = head_forward(self.decode_head, self.extract_feat(inputs))
            finally:
                hook.remove()
        # Channels-last: torch's bilinear kernel vectorises over the K classes there, and the per-pixel argmax of
        # mmseg's postprocess_result then reads K contiguous floats instead of K planes far apart (image -> labels
        # 1.29-1.38x faster at 1024 px on an AVX2 CPU: `tools/benchmark.py --only seg-resize`, docs/BENCHMARKS.md).
        logits = logits.contiguous(memory_format=torch.channels_last)
        # "stretch" (mmseg): the padded grid's logits resized straight to the input size
        return logits, ((H, W) if self.padded_logits == "stretch" else (th, tw)), (H, W)

    def encode_decode(self, inputs, batch_img_metas):
        """Logits (B, K, H, W) at the size of ``inputs``; pads to what the backbone takes and crops back.

        Same values as an NCHW resize to float rounding; the returned tensor has channels-last strides. With
        ``refine`` (and ``use_refine``), the refined class probabilities instead (``refined_probs``).
        """
        if self.refining:
            return self.refined_probs(inputs)
        logits, size, (H, W) = self._head_logits(inputs)
        return F.interpolate(logits, size=size, mode="bilinear", align_corners=self.align_corners)[..., :H, :W]

    @property
    def refining(self):
        """Whether inference runs the affinity refinement (``refine`` set and ``use_refine`` on)."""
        return self.refine is not None and self.use_refine

    @torch.no_grad()
    def refined_probs(self, inputs):
        """Class probabilities (B, K, H, W) at the size of ``inputs`` after the affinity walk of ``refine`` (inference
        only: no autograd; the head is trained on the frozen segmentor by ``python -m tasks.seg.affinity``).

        The segmentor's softmax at the input size walks along the affinity head's ``affinity ** beta`` over the
        pixels whose argmax is not ``background``. Those pixels then hold the walked probabilities of the item
        classes (renormalised, background 0), so that their argmax is the best item class of the walk; the others keep
        the segmentor's probabilities, and with them its background label.
        """
        if self.refine is None:
            raise ValueError("this segmentor has no refine head; build it with refine=dict(...) "
                             "(ZooEncoderDecoder.REFINE_DEFAULTS)")
        got = []
        logits, size, (H, W) = self._head_logits(inputs, got)
        padded, feats = got
        probs = F.interpolate(logits, size=size, mode="bilinear", align_corners=self.align_corners)[..., :H, :W]
        probs = probs.float().softmax(1).contiguous()
        r = self.refine
        aff = self.affinity_head(padded, feats).float().sigmoid()[..., :H, :W]
        mask = item_mask(probs.argmax(1), r["background"])
        walked = random_walk(probs, aff, mask, r["beta"], r["steps"], self.affinity_head.offsets, r["tol"])
        if r["background"] is None:
            return walked
        walked[:, r["background"]] = 0  # an item pixel takes an item class
        walked = walked / walked.sum(1, keepdim=True).clamp_min(torch.finfo(walked.dtype).tiny)
        return torch.where(mask[:, None], walked, probs)

    def slide_inference(self, inputs, batch_img_metas):
        """mmseg's sliding-window inference (the same windows, sums and division: the same logits), written so that
        ``torch.export`` can trace it: the windows' coverage is checked on their geometry (``slide_windows``) instead
        of by a data-dependent assert, and each window's logits are added into its part of the output instead of
        being padded to the whole image first (one (B, K, H, W) tensor less per window)."""
        B, _, H, W = inputs.shape
        windows = slide_windows((H, W), self.test_cfg.crop_size, self.test_cfg.stride)
        preds = inputs.new_zeros((B, self.out_channels, H, W))
        count = inputs.new_zeros((1, 1, H, W))
        for y1, y2, x1, x2 in windows:
            crop = inputs[:, :, y1:y2, x1:x2]
            batch_img_metas[0]["img_shape"] = crop.shape[2:]  # as mmseg: the heads see the window's shape
            preds[:, :, y1:y2, x1:x2] += self.encode_decode(crop, batch_img_metas)
            count[:, :, y1:y2, x1:x2] += 1
        return preds / count

    def predict(self, inputs, data_samples=None):
        """mmseg's ``predict``: a ``SegDataSample`` per image, ``pred_sem_seg`` and ``seg_logits`` at its original size.

        With ``test_cfg.return_logits=False`` (the zoo's seg configs set it; evaluation reads the labels only) the
        samples carry ``pred_sem_seg`` only, computed by ``zoo.layers.resize_argmax`` from the head's logits: the
        same labels as the argmax of the resized logits (to float rounding), without the (K, H, W) tensor
        that mmseg writes and reads once per image (at 1024 px and 150 classes, 600 MB and a third of a light-head
        segmentor's CPU inference; `tools/benchmark.py --only seg-resize`). Test-time augmentation merges logits, so
        ``tools/test.py --tta`` turns it back on.
        """
        if self.test_cfg.get("return_logits", True) or self.out_channels == 1:
            return super().predict(inputs, data_samples)
        shape = tuple(inputs.shape[2:])
        metas = self._metas(inputs, data_samples)
        if data_samples is None:
            data_samples = [SegDataSample() for _ in metas]
        if self.test_cfg.get("mode", "whole") == "whole" and not self.refining:
            logits, size, (H, W) = self._head_logits(inputs)
        else:  # slide or refine: the full-size logits or probabilities, labelled (and resized to the original size)
            logits, size, (H, W) = self.inference(inputs, metas), shape, shape
        for i, (meta, sample) in enumerate(zip(metas, data_samples)):
            left, right, top, bottom = meta.get("img_padding_size", meta.get("padding_size", [0] * 4))
            rows, cols = (top, H - bottom), (left, W - right)  # mmseg's postprocess_result drops the padding
            x = logits[i:i + 1]
            flip = (3 if meta.get("flip_direction") == "horizontal" else 2) if meta.get("flip") else None
            if (rows[1] - rows[0], cols[1] - cols[0]) == tuple(meta["ori_shape"]):  # one resize: fuse it
                labels = resize_argmax(x, size, self.align_corners, rows, cols)
                labels = labels if flip is None else labels.flip(dims=(flip - 1,))
            else:  # mmseg resizes twice (to the input, then to the original size): the first one as it does
                if tuple(x.shape[2:]) != tuple(size):
                    x = F.interpolate(x, size=size, mode="bilinear", align_corners=self.align_corners)
                x = x[..., rows[0]:rows[1], cols[0]:cols[1]]
                x = x if flip is None else x.flip(dims=(flip,))
                labels = resize_argmax(x, tuple(meta["ori_shape"]), self.align_corners)
            sample.set_data({"pred_sem_seg": PixelData(data=labels)})
        return data_samples

    def _forward(self, inputs, data_samples=None):
        """``mode='tensor'``: per-pixel logits (B, K, H, W) at the input resolution (whole or slide inference)."""
        return self.inference(inputs, self._metas(inputs, data_samples))

    @staticmethod
    def _metas(inputs, data_samples):
        """The samples' metainfo, or (without samples) mmseg's stand-in: every shape the input's, no padding."""
        if data_samples is not None:
            return [s.metainfo for s in data_samples]
        shape = tuple(inputs.shape[2:])
        return [dict(ori_shape=shape, img_shape=shape, pad_shape=shape, padding_size=[0, 0, 0, 0])
                for _ in range(inputs.shape[0])]


# ``decode_head=`` of ``model_cfg`` / ``build`` -> the mmseg head class it builds.
DECODE_HEADS = {"uper": "UPerHead", "segformer": "SegformerHead"}
# Defaults per head: (channels, aux_channels). The light head has no auxiliary head (SegFormer trains without one).
HEAD_DEFAULTS = {"uper": (512, 256), "segformer": (128, 0)}


# Default rescaling of the four trunk maps by the neck, per head: MultiLevelNeck's ``scales`` for UPerNet (strides
# 4-32 from a stride-16 trunk), Feature2Pyramid's ``rescales`` for the light head (strides 8-64).
NECK_SCALES = {"uper": [4, 2, 1, 0.5], "segformer": [2, 1, 0.5, 0.25]}


def neck_scales_of(neck):
    """The rescaling factors of a built neck (``MultiLevelNeck.scales`` / ``Feature2Pyramid.rescales``), or None."""
    scales = getattr(neck, "scales", None)
    scales = getattr(neck, "rescales", None) if scales is None else scales
    return None if scales is None else [float(s) if s % 1 else int(s) for s in scales]


def _decode_head_cfg(kind, num_classes, channels, norm_cfg, neck_scales=None, num_maps=4):
    """Neck and decode head of ``kind`` (see ``DECODE_HEADS``) as mmseg dicts; ``neck_scales`` replaces the neck's
    default rescaling (``NECK_SCALES``). ``num_maps``: how many trunk maps there are; UPerNet's neck rescales them all
    and its decode head reads the first four (the rest feed auxiliary heads), the light head takes exactly four."""
    common = dict(in_index=[0, 1, 2, 3], channels=channels, dropout_ratio=0.1, num_classes=num_classes,
                  norm_cfg=norm_cfg, align_corners=False,
                  loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0))
    if kind not in DECODE_HEADS:
        raise ValueError(f"decode_head must be one of {sorted(DECODE_HEADS)}, got {kind!r}")
    if num_maps < 4 or (kind != "uper" and num_maps != 4):
        raise ValueError(f"the {kind} head needs {'at least ' if kind == 'uper' else ''}4 trunk maps (out_indices), "
                         f"got {num_maps}")
    scales = list(NECK_SCALES[kind] if neck_scales is None else neck_scales)
    if neck_scales is None and num_maps > 4:
        raise ValueError(f"{num_maps} trunk maps (out_indices) need neck_scales with {num_maps} factors; the default "
                         f"has 4")
    if len(scales) != num_maps:
        raise ValueError(f"neck_scales needs one factor per trunk map ({num_maps}), got {scales}")
    if kind == "uper":
        return dict(type="MultiLevelNeck", scales=scales), dict(type="UPerHead", pool_scales=(1, 2, 3, 6), **common)
    # The light head (configs/seg/_base_/models/segformerhead_zoo-vit.py): BEiT's Feature2Pyramid at strides
    # 8, 16, 32, 64 (one transposed conv up, max-pools down) and SegFormer's all-MLP head fused at stride 8.
    allowed = {4, 2, 1, 0.5, 0.25}
    if not set(scales) <= allowed:
        raise ValueError(f"Feature2Pyramid rescales by {sorted(allowed)} only, got neck_scales={scales}")
    return dict(type="Feature2Pyramid", rescales=scales, norm_cfg=norm_cfg), dict(type="SegformerHead", **common)


def model_cfg(name, num_classes=150, img_size=512, patch_size=16, in_chans=3, channels=None, aux_channels=None,
              drop_path_rate=0.1, norm_type="BN", test_cfg=None, out_indices=None, final_norm=False, class_token=True,
              padded_logits="crop", decode_head="uper", neck_scales=None, aux_index=3, refine=None):
    """The UPerNet recipe as an mmseg model dict (what ``configs/seg/_base_/models/upernet_zoo-vit.py`` spells out),
    or with ``decode_head="segformer"`` the light one (``configs/seg/_base_/models/segformerhead_zoo-vit.py``).

    Args:
        name: Registered model name.
        num_classes: Classes K.
        img_size: Training crop; the backbone's size (and the fixed input of ``ff`` models).
        patch_size, in_chans: Tokenizer.
        channels: Decode head width (default 512 for UPerHead as in mmseg, 128 for the light head).
        aux_channels: FCN auxiliary head width (default 256 for UPerNet as in mmseg, 0 for the light head); 0 drops
            the auxiliary head.
        drop_path_rate: Stochastic depth of the trunk (0.1 in mmseg's DeiT recipe).
        norm_type: ``BN`` (works on CPU and one GPU) or ``SyncBN`` (multi-GPU).
        test_cfg: Inference mode; default whole, or slide at the crop for fixed-token models.
        out_indices, final_norm, class_token: Backbone options (``ZooViTBackbone``; mmseg's ViT ``out_indices``,
            ``final_norm``, ``with_cls_token``).
        padded_logits: ``crop`` or ``stretch`` (mmseg), see ``ZooEncoderDecoder``.
        decode_head: ``"uper"`` (UPerNet: MultiLevelNeck + UPerHead) or ``"segformer"`` (Feature2Pyramid at
            strides 8-64 + SegformerHead; ~100x less head time than UPerNet at 1024 px, docs/BENCHMARKS.md).
        neck_scales: How the neck rescales the four trunk maps (default ``NECK_SCALES[decode_head]``); e.g.
            ``[2, 1, 0.5, 0.25]`` keeps UPerNet's maps at strides 2-16 for a patch-4 trunk, as the scenes configs do.
            UPerNet takes more factors than its four maps when ``out_indices`` names as many blocks: the decode head
            reads the first four maps, the others are there for the auxiliary head (``aux_index``).
        aux_index: The map the FCN auxiliary head reads (mmseg's ``in_index``; default 3, the last block at the
            neck's coarsest scale, as mmseg's ViT + UPerNet configs). E.g. ``out_indices=[0, 1, 2, 3, 3]``,
            ``neck_scales=[1, 0.5, 0.25, 0.125, 1]``, ``aux_index=4``: the auxiliary loss on the last block at its
            own token grid.
        refine: None, or the affinity refinement of ``ZooEncoderDecoder`` (a dict of its ``REFINE_DEFAULTS``' keys).
    """
    crop = _pair(img_size)
    norm_cfg = dict(type=norm_type, requires_grad=True)
    if decode_head not in HEAD_DEFAULTS:
        raise ValueError(f"decode_head must be one of {sorted(DECODE_HEADS)}, got {decode_head!r}")
    channels = HEAD_DEFAULTS[decode_head][0] if channels is None else channels
    aux_channels = HEAD_DEFAULTS[decode_head][1] if aux_channels is None else aux_channels
    num_maps = 4 if out_indices is None else len(out_indices)
    neck, head = _decode_head_cfg(decode_head, num_classes, channels, norm_cfg, neck_scales, num_maps)
    if aux_channels and not 0 <= aux_index < num_maps:
        raise ValueError(f"aux_index={aux_index} names no map: the trunk returns {num_maps} (out_indices)")
    if test_cfg is None:
        test_cfg = (dict(mode="slide", crop_size=crop, stride=slide_stride(crop)) if is_fixed_tokens(name)
                    else dict(mode="whole"))
    cfg = dict(
        type="ZooEncoderDecoder",
        data_preprocessor=dict(type="SegDataPreProcessor", mean=MEAN, std=STD, bgr_to_rgb=True, pad_val=0,
                               seg_pad_val=255, size=crop),
        backbone=dict(type="ZooViTBackbone", name=name, img_size=crop, patch_size=patch_size, in_chans=in_chans,
                      drop_path_rate=drop_path_rate, out_indices=None if out_indices is None else list(out_indices),
                      final_norm=final_norm, class_token=class_token),
        neck=neck,
        decode_head=head,
        auxiliary_head=None if not aux_channels else dict(
            type="FCNHead", in_index=aux_index, channels=aux_channels, num_convs=1, concat_input=False,
            dropout_ratio=0.1, num_classes=num_classes, norm_cfg=norm_cfg, align_corners=False,
            loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=0.4)),
        train_cfg=dict(),
        test_cfg=test_cfg,
        padded_logits=padded_logits,
    )
    if refine is not None:
        cfg["refine"] = dict(refine)
    return ConfigDict(cfg)


def build(model_name, task="seg", mixer=None, size=None, num_classes=150, img_size=512, patch_size=16, in_chans=3,
          channels=None, aux_channels=None, drop_path_rate=0.0, norm_type="BN", test_cfg=None, backbone_checkpoint=None,
          out_indices=None, final_norm=False, class_token=True, padded_logits="crop", decode_head="uper",
          neck_scales=None, aux_index=3, refine=None):
    """Build the UPerNet (or, with ``decode_head="segformer"``, the light-head) segmentor for ``model_name``
    (``zoo.load(name, task='seg', ...)`` lands here).

    Args:
        model_name: Registered model name (mixer and size are read from it; ``mixer``/``size`` are accepted for the
            registry's common signature).
        num_classes, img_size, patch_size, in_chans, channels, aux_channels, norm_type, test_cfg: See ``model_cfg``.
        drop_path_rate: Stochastic depth (0 for inference; configs use mmseg's 0.1 for training).
        backbone_checkpoint: A classification checkpoint for the trunk (zoo safetensors, timm/DeiT, official FF).
        out_indices, final_norm, class_token, padded_logits: mmseg-compatibility options (see ``model_cfg``);
            mmseg's UPerNet + DeiT ``_mln_`` ADE20K weights need ``padded_logits="stretch"`` to give mmseg's logits
            on inputs whose sides are not multiples of 16 (``zoo.convert`` loads their layout).
        decode_head, neck_scales, aux_index: The decode head (``"uper"`` or ``"segformer"``, the light head), the
            neck's rescaling of the trunk maps and the map the auxiliary head reads, see ``model_cfg``.

    Returns:
        A ``ZooEncoderDecoder`` in train mode with mmseg's head initialisation applied (so a later
        ``init_weights()`` is a no-op).
    """
    if model_info(model_name)["mixer"] != mixer and mixer is not None:
        raise ValueError(f"mixer {mixer!r} does not match model {model_name!r}")
    cfg = model_cfg(model_name, num_classes=num_classes, img_size=img_size, patch_size=patch_size, in_chans=in_chans,
                    channels=channels, aux_channels=aux_channels, drop_path_rate=drop_path_rate, norm_type=norm_type,
                    test_cfg=test_cfg, out_indices=out_indices, final_norm=final_norm, class_token=class_token,
                    padded_logits=padded_logits, decode_head=decode_head, neck_scales=neck_scales,
                    aux_index=aux_index, refine=refine)
    cfg.pop("type")
    # sub-modules (data preprocessor, heads) live in mmseg's registry
    with DefaultScope.overwrite_default_scope("mmseg"):
        model = ZooEncoderDecoder(**cfg)
    # mmseg's head/neck init now, so the Runner's later call cannot reset loaded weights. mmengine logs one INFO
    # line per parameter when no log file is open; keep the console quiet.
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        model.init_weights()
    finally:
        logger.setLevel(level)
    if backbone_checkpoint is not None:
        model.backbone.load_classification_checkpoint(backbone_checkpoint)
    return model
