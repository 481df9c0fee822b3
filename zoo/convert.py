"""Official checkpoint layouts -> zoo layout, and strict loading of a local weights file into a zoo model.

``load_checkpoint(model, path)`` reads a file with ``zoo.checkpoint.read`` (``.safetensors``, or ``.pth``/``.pt``/
``.bin``/``.pth.tar`` with ``torch.load(weights_only=True)``; an mmengine checkpoint of ``tools/train.py`` gives the
zoo model's part of its task model), unwraps it (``model`` / ``state_dict`` / ``model_ema``, or a named ``key`` such
as ``state_dict_ema``; ``module.``), recognises the layout by its keys and converts it (``CONVERTERS``):

- **zoo** -- keys exactly ``model.state_dict()`` (what ``zoo.save_pretrained`` and ``tools/convert.py`` write).
- **timm_vit**: timm / DeiT ``VisionTransformer`` (Dosovitskiy et al., ViT, https://arxiv.org/abs/2010.11929;
  Touvron et al., DeiT, https://arxiv.org/abs/2012.12877) into ``sa_vit_*``: the same names except
  ``blocks.N.attn.*`` -> ``blocks.N.mixer.*``. Position embeddings are bicubically resampled when the grid
  differs. Distilled DeiT (``dist_token``, ``head_dist``) is refused unless ``drop_distillation=True``.
- **ff_official**: the FF-only release (Melas-Kyriazi, "Do You Even Need Attention?", https://arxiv.org/abs/2105.02723;
  lukemelas/do-you-even-need-attention ``linear-{tiny,base}-checkpoint.pth``) into ``ff_vit_*``. The official
  block is ``x + mlp1(norm1(x))`` (channel MLP) then ``x + mlp2(norm2(x^T))^T`` (token LayerNorm over N and
  token MLP), so::

      blocks.i.norm1, blocks.i.mlp1.fc{1,2}  ->  blocks.i.norm2, blocks.i.mlp.fc{1,2}      (channel)
      blocks.i.norm2, blocks.i.mlp2.fc{1,2}  ->  blocks.i.mixer.norm, blocks.i.mixer.fc{1,2}  (token)
      pos_encoding.cls_pos_embed (1, 1, E) ++ pos_encoding.pos_embed (1, E, gh, gw) -> pos_embed (1, 1 + gh*gw, E)

  The token-MLP weights are shaped by N, so a model built for another token count cannot take them.
- **mmseg_vit**: an mmsegmentation ``EncoderDecoder`` with its ``VisionTransformer`` backbone, ``MultiLevelNeck``,
  ``UPerHead`` and ``FCNHead`` (mmseg's UPerNet + DeiT ADE20K checkpoints, ``{'meta', 'state_dict'}``) into the
  zoo's ``sa_vit_*`` segmentor (``zoo.load(name, task='seg')``). Neck and heads are mmseg's own classes in the zoo
  segmentor, so their keys pass unchanged; the backbone maps as::

      backbone.patch_embed.projection.{weight,bias}      -> backbone.trunk.patch_embed.proj.{weight,bias}
      backbone.cls_token, backbone.pos_embed             -> backbone.trunk.cls_token, backbone.trunk.pos_embed
      backbone.layers.i.ln1 / ln2                        -> backbone.trunk.blocks.i.norm1 / norm2
      backbone.layers.i.attn.attn.in_proj_{weight,bias}  -> backbone.trunk.blocks.i.mixer.qkv.{weight,bias}
      backbone.layers.i.attn.attn.out_proj.*             -> backbone.trunk.blocks.i.mixer.proj.*
      backbone.layers.i.ffn.layers.0.0.* / ffn.layers.1.* -> backbone.trunk.blocks.i.mlp.fc1.* / mlp.fc2.*
      backbone.ln1 (final_norm=True only)                -> backbone.trunk.norm

  ``nn.MultiheadAttention``'s packed projection is q|k|v stacked on the output axis, as timm's ``qkv``, and both
  scale by 1/sqrt(d). mmseg 1.x builds the patch projection without a bias (``patch_bias=False``) while the
  released 0.x checkpoints carry one: a missing bias is filled with zeros (the same function). A model built
  without ``final_norm`` refuses a checkpoint with ``backbone.ln1`` (and the reverse), naming the option.
- **eamlp_t2t**: EANet's EAMLP (Guo et al., https://arxiv.org/abs/2105.02358; MenghaoGuo/EANet ``EAMLP/``: T2T-ViT
  with external attention) into the zoo's ``*_t2t_*`` classifier (``zoo.backbones.t2t``)::

      tokens_to_token.attention{1,2}.norm1/norm2/mlp.*   -> tokens_to_token.stages.{0,1}.norm1/norm2/mlp.*
      tokens_to_token.attention{1,2}.attn.q_linear.*     -> tokens_to_token.stages.{0,1}.mixer.in_proj.*
      tokens_to_token.attention{1,2}.attn.{linear_0,linear_1,proj}.* -> ...stages.{0,1}.mixer.{same}.*
      blocks.i.attn.{trans_dims,linear_0,linear_1,proj}.* -> blocks.i.mixer.{same}.*
      tokens_to_token.project, cls_token, pos_embed, blocks.i.norm1/norm2/mlp, norm, head: same names

  The released checkpoint is a timm ``CheckpointSaver`` dict whose evaluation used ``state_dict_ema``.

Every converter maps each source key by an explicit rule (a key no rule knows is an error naming it) and asserts
the number of keys it produced; ``zoo.checkpoint.check_state_dict`` then compares every name and shape with the
model. Any missing, unexpected or wrongly shaped key raises ``zoo.checkpoint.CheckpointError`` (also importable from
here) naming the file, the format and layout it was read as, and the keys. A head of
another size is dropped only when ``drop_head=True``; the model keeps its freshly initialised head.
"""
import re

import torch

from . import checkpoint as ckpt
from .checkpoint import CheckpointError, unwrap  # noqa: F401  (zoo.convert's historical names)
from .layers import resample_pos_embed

WEIGHT_FILES = ckpt.WEIGHT_FILES


# -- reading ------------------------------------------------------------------------------------------------------
def read_state_dict(path, key=None):
    """Read a weights file (or a published folder's) into a flat ``{name: tensor}`` (``zoo.checkpoint.read``).

    Args:
        path: A ``.safetensors`` file, a torch file (read with ``weights_only=True``), or a published folder
            holding ``model.safetensors``.
        key: Take the tensors from this entry of the checkpoint dict (e.g. ``state_dict_ema``); by default the first
            of ``model``, ``state_dict``, ``model_ema`` that exists, else the dict itself.

    Raises:
        CheckpointError: The file is refused by ``weights_only``, truncated or corrupt, or holds no tensors.
    """
    return ckpt.read(path, key=key).state


# -- layout sniffing ----------------------------------------------------------------------------------------------
LAYOUT_NAMES = {
    "zoo": "zoo",
    "timm_vit": "timm / DeiT ViT",
    "ff_official": "FF-only official",
    "mmseg_vit": "mmseg UPerNet + ViT",
    "eamlp_t2t": "EANet EAMLP (T2T-ViT + external attention)",
}


def detect_layout(sd):
    """Name the layout of a state dict: ``mmseg_vit``, ``eamlp_t2t``, ``timm_vit``, ``ff_official`` or ``zoo``."""
    keys = list(sd)
    if any(k.startswith(("backbone.layers.", "backbone.patch_embed.projection.")) for k in keys):
        return "mmseg_vit"
    if any(k.startswith("tokens_to_token.attention") for k in keys):
        return "eamlp_t2t"
    if any(re.match(r"blocks\.\d+\.attn\.", k) for k in keys):
        return "timm_vit"
    if "pos_encoding.pos_embed" in sd or any(re.match(r"blocks\.\d+\.mlp[12]\.", k) for k in keys):
        return "ff_official"
    return "zoo"


def _mixer_of(model):
    name = getattr(model, "zoo_config", {}).get("name")
    return getattr(model, "mixer_name", None) or (name.split("_")[0] if name else "?")


def _model_name(model):
    return getattr(model, "zoo_config", {}).get("name", type(model).__name__)


def _is_segmentor(model):
    return hasattr(model, "decode_head") and hasattr(getattr(model, "backbone", None), "trunk")


def _is_t2t(model):
    return hasattr(model, "tokens_to_token")


def _check_count(out, expected, layout, what):
    """Every source key maps to exactly one zoo key: a different count means a rule dropped or duplicated one."""
    if len(out) != expected:
        raise CheckpointError(f"{layout}: converting {what} produced {len(out)} keys, expected {expected}")


# -- conversions --------------------------------------------------------------------------------------------------
def _fit_pos_embed(pos, trunk, source_grid=None):
    """Resample a (1, prefix + n, E) position embedding to the trunk's grid when the patch count differs."""
    target = trunk.pos_embed
    grid = tuple(trunk.patch_embed.grid_size)
    if pos.shape == target.shape and source_grid in (None, grid):
        return pos
    if pos.shape[-1] != target.shape[-1]:
        return pos  # a width mismatch is reported by the strict check
    prefix = getattr(trunk, "num_prefix_tokens", 1)
    return resample_pos_embed(pos, grid, prefix, old_size=source_grid)


def _drop_cls_row(pos, trunk):
    """A checkpoint trained with a cls token into a trunk without one: the token's position row goes too."""
    return pos[:, 1:] if getattr(trunk, "cls_token", True) is None else pos


def convert_timm_vit(sd, model, drop_distillation=False):
    """timm / DeiT ``VisionTransformer`` keys -> ``sa_vit_*`` keys (``attn.`` -> ``mixer.``).

    Args:
        sd: The timm state dict (unwrapped).
        model: The zoo model that will receive it (read for its mixer, grid and prefix tokens).
        drop_distillation: For distilled DeiT checkpoints: drop ``dist_token``, its position-embedding row and
            ``head_dist`` (the zoo trunk has no distillation token; the result is the cls-token path only and its
            logits differ from DeiT's averaged two-head output, so fine-tune or evaluate it as such).
    """
    mixer = _mixer_of(model)
    if mixer != "sa":
        raise CheckpointError(f"this is a timm/DeiT ViT checkpoint (softmax attention, blocks.N.attn.*); it loads into "
                              f"sa_vit_* models only, not {_model_name(model)!r} (mixer {mixer!r}).")
    out = {}
    distilled = "dist_token" in sd
    if distilled and not drop_distillation:
        extra = sorted(k for k in sd if k == "dist_token" or k.startswith("head_dist."))
        raise CheckpointError(
            f"this is a distilled DeiT checkpoint ({', '.join(extra)}); the zoo ViT has no distillation token. "
            f"Pass drop_distillation=True to zoo.convert.load_checkpoint to drop the distillation token, its "
            f"position-embedding row and head_dist (the model then uses the cls-token head alone).")
    no_cls = getattr(model, "cls_token", True) is None
    for k, v in sd.items():
        if distilled and (k == "dist_token" or k.startswith("head_dist.")):
            continue
        if k == "cls_token" and no_cls:
            continue
        k = re.sub(r"^(blocks\.\d+)\.attn\.", r"\1.mixer.", k)
        if k == "pos_embed" and distilled:
            v = torch.cat([v[:, :1], v[:, 2:]], dim=1)  # drop the dist token's row: (1, 2 + n, E) -> (1, 1 + n, E)
        if k == "pos_embed":
            v = _fit_pos_embed(_drop_cls_row(v, model), model)
        out[k] = v
    return out


def convert_ff_official(sd, model):
    """The FF-only official layout (``LinearVisionTransformer``) -> ``ff_vit_*`` keys (see the module docstring)."""
    mixer = _mixer_of(model)
    if mixer != "ff":
        raise CheckpointError(f"this is an official FF-only checkpoint (blocks.N.mlp1/mlp2, pos_encoding.*); it loads "
                              f"into ff_vit_* models only (ff_vit_tiny, ff_vit_base), not {_model_name(model)!r}.")
    # The token MLP's input width is the token count the checkpoint was trained for.
    norm_key = next((k for k in sd if re.match(r"blocks\.\d+\.norm2\.weight$", k)), None)
    if norm_key is not None and hasattr(model, "num_tokens") and sd[norm_key].shape[0] != model.num_tokens:
        n = sd[norm_key].shape[0]
        raise CheckpointError(
            f"the FF checkpoint's token MLP is shaped for N={n} tokens (a {int((n - 1) ** 0.5)}x{int((n - 1) ** 0.5)} "
            f"grid + cls), but the model was built for N={model.num_tokens}; token-MLP weights cannot be resampled to "
            f"another token count. Build the model for the checkpoint's input size (e.g. img_size=224 with patch 16).")
    out = {}
    grid = None
    for k, v in sd.items():
        m = re.match(r"^(blocks\.\d+)\.(norm1|norm2|mlp1|mlp2)\.(.*)$", k)
        if m:
            blk, part, rest = m.groups()
            new = {"norm1": "norm2", "mlp1": "mlp", "norm2": "mixer.norm", "mlp2": "mixer"}[part]
            out[f"{blk}.{new}.{rest}"] = v
        elif k == "pos_encoding.pos_embed":
            grid = tuple(v.shape[-2:])
            out["_grid_pos"] = v.flatten(2).transpose(1, 2)  # (1, E, gh, gw) -> (1, gh*gw, E), row-major
        elif k == "pos_encoding.cls_pos_embed":
            out["_cls_pos"] = v
        else:
            out[k] = v
    if "_grid_pos" in out or "_cls_pos" in out:
        if "_grid_pos" not in out or "_cls_pos" not in out:
            raise CheckpointError("FF checkpoint has only one of pos_encoding.pos_embed / pos_encoding.cls_pos_embed")
        pos = torch.cat([out.pop("_cls_pos"), out.pop("_grid_pos")], dim=1)  # (1, 1 + gh*gw, E), cls first
        out["pos_embed"] = _fit_pos_embed(pos, model, source_grid=grid) if hasattr(model, "patch_embed") else pos
    return out


# mmseg ``TransformerEncoderLayer`` suffix -> zoo ``Block`` suffix
_MMSEG_LAYER = {
    "ln1.weight": "norm1.weight", "ln1.bias": "norm1.bias",
    "ln2.weight": "norm2.weight", "ln2.bias": "norm2.bias",
    "attn.attn.in_proj_weight": "mixer.qkv.weight", "attn.attn.in_proj_bias": "mixer.qkv.bias",
    "attn.attn.out_proj.weight": "mixer.proj.weight", "attn.attn.out_proj.bias": "mixer.proj.bias",
    "ffn.layers.0.0.weight": "mlp.fc1.weight", "ffn.layers.0.0.bias": "mlp.fc1.bias",
    "ffn.layers.1.weight": "mlp.fc2.weight", "ffn.layers.1.bias": "mlp.fc2.bias",
}
_MMSEG_TOP = {
    "backbone.patch_embed.projection.weight": "backbone.trunk.patch_embed.proj.weight",
    "backbone.patch_embed.projection.bias": "backbone.trunk.patch_embed.proj.bias",
    "backbone.cls_token": "backbone.trunk.cls_token",
    "backbone.pos_embed": "backbone.trunk.pos_embed",
    "backbone.ln1.weight": "backbone.trunk.norm.weight",
    "backbone.ln1.bias": "backbone.trunk.norm.bias",
}
_MMSEG_PASS = ("neck.", "decode_head.", "auxiliary_head.")  # mmseg's own modules inside the zoo segmentor


def convert_mmseg_vit(sd, model):
    """mmseg ``EncoderDecoder`` (ViT backbone, MLN neck, UPerHead, FCN aux) -> the zoo ``sa_vit_*`` segmentor.

    Args:
        sd: The mmseg state dict (``checkpoint['state_dict']``).
        model: A zoo segmentor (``zoo.load(name, task='seg', ...)``) with the ``sa`` mixer.

    Returns:
        The zoo-layout state dict (not yet loaded; ``load_checkpoint`` checks it strictly).
    """
    if not _is_segmentor(model):
        raise CheckpointError(f"this is an mmseg segmentation checkpoint (backbone/neck/decode_head); load it into a "
                              f"segmentation model, zoo.load({_model_name(model)!r}, task='seg', ...), not a "
                              f"{type(model).__name__}.")
    mixer = _mixer_of(model)
    if mixer != "sa":
        raise CheckpointError(f"this is an mmseg ViT checkpoint (softmax attention); it loads into sa_vit_* "
                              f"segmentors only, not {_model_name(model)!r} (mixer {mixer!r}).")
    bb = model.backbone
    unknown = [k for k in sd if not (k in _MMSEG_TOP or k.startswith(_MMSEG_PASS)
                                     or re.match(r"backbone\.layers\.\d+\.", k))]
    unsupported = [k for k in unknown if k.startswith(("backbone.pre_ln", "backbone.patch_embed.norm"))]
    if unsupported:
        raise CheckpointError(f"this mmseg ViT uses options the zoo trunk does not have (pre_norm / patch_norm: "
                              f"{', '.join(unsupported)}); it cannot be converted exactly.")
    if unknown:  # e.g. another backbone family: refuse before mapping anything
        raise CheckpointError(f"mmseg checkpoint keys outside the ViT + UPerNet layout ({len(unknown)}): "
                              f"{', '.join(unknown[:12])}{' ...' if len(unknown) > 12 else ''}")
    has_final = "backbone.ln1.weight" in sd
    if has_final != bb.final_norm:
        raise CheckpointError(
            f"the checkpoint was trained {'with' if has_final else 'without'} mmseg's final_norm (backbone.ln1 "
            f"{'present' if has_final else 'absent'}); build the segmentor with final_norm={has_final}.")
    out = {}
    for k, v in sd.items():
        if k in _MMSEG_TOP:
            new = _MMSEG_TOP[k]
            if k == "backbone.cls_token" and not bb.class_token:
                continue  # mmseg's with_cls_token=False keeps the parameter but drops the token before the layers
            if k == "backbone.pos_embed":
                v = _fit_pos_embed(_drop_cls_row(v, bb.trunk), bb.trunk)
            out[new] = v
        elif k.startswith("backbone.layers."):
            i, rest = re.match(r"backbone\.layers\.(\d+)\.(.*)$", k).groups()
            if rest not in _MMSEG_LAYER:
                raise CheckpointError(f"mmseg ViT layer key {k!r} has no counterpart in the zoo block (known: "
                                      f"{', '.join(_MMSEG_LAYER)})")
            if rest == "attn.attn.in_proj_weight" and v.shape[0] != 3 * v.shape[1]:
                raise CheckpointError(f"{k}: expected a packed q|k|v projection (3C, C), got {tuple(v.shape)}")
            out[f"backbone.trunk.blocks.{i}.{_MMSEG_LAYER[rest]}"] = v
        else:
            out[k] = v
    expected = len(sd) - (1 if "backbone.cls_token" in sd and not bb.class_token else 0)
    _check_count(out, expected, "mmseg_vit", "the checkpoint")
    bias = "backbone.trunk.patch_embed.proj.bias"
    if bias not in out and "backbone.trunk.patch_embed.proj.weight" in out:
        # mmseg 1.x's ViT has patch_bias=False: a zero bias is the same function
        out[bias] = torch.zeros(out["backbone.trunk.patch_embed.proj.weight"].shape[0])
    return out


def convert_eamlp_t2t(sd, model):
    """EANet's EAMLP (T2T-ViT + external attention, official names) -> the zoo ``*_t2t_*`` classifier.

    Args:
        sd: The official state dict (``checkpoint['state_dict_ema']`` for the released model).
        model: A zoo ``T2TViT`` (``zoo.load('ea_t2t_7', img_size=384)``).
    """
    if not _is_t2t(model):
        raise CheckpointError(f"this is an EAMLP checkpoint (T2T-ViT front end, tokens_to_token.*); it loads into "
                              f"the *_t2t_* classifiers (e.g. ea_t2t_7), not {_model_name(model)!r}.")
    mixer = _mixer_of(model)
    if mixer != "ea":
        raise CheckpointError(f"this is an EAMLP checkpoint (external attention in the blocks); it loads into ea_t2t_* "
                              f"models only, not {_model_name(model)!r} (mixer {mixer!r}).")
    out, unknown = {}, []
    for k, v in sd.items():
        m = re.match(r"^tokens_to_token\.attention([12])\.(.*)$", k)
        if m:
            stage, rest = int(m.group(1)) - 1, m.group(2)
            rest = re.sub(r"^attn\.q_linear\.", "mixer.in_proj.", rest)
            rest = re.sub(r"^attn\.(linear_0|linear_1|proj)\.", r"mixer.\1.", rest)
            if not re.match(r"^(norm1|norm2|mlp\.fc[12]|mixer\.(in_proj|linear_0|linear_1|proj))\.(weight|bias)$",
                            rest):
                unknown.append(k)
                continue
            out[f"tokens_to_token.stages.{stage}.{rest}"] = v
        elif re.match(r"^blocks\.\d+\.attn\.(trans_dims|linear_0|linear_1|proj)\.(weight|bias)$", k):
            out[re.sub(r"^(blocks\.\d+)\.attn\.", r"\1.mixer.", k)] = v
        elif re.match(r"^(blocks\.\d+\.(norm1|norm2|mlp\.fc[12])|tokens_to_token\.project|norm|head)\.(weight|bias)$",
                      k) or k in ("cls_token", "pos_embed"):
            out[k] = v
        else:
            unknown.append(k)
    if unknown:
        raise CheckpointError(f"EAMLP checkpoint keys outside the T2T-ViT + external attention layout "
                              f"({len(unknown)}): {', '.join(unknown[:12])}{' ...' if len(unknown) > 12 else ''}")
    _check_count(out, len(sd), "eamlp_t2t", "the checkpoint")
    pos = out.get("pos_embed")
    if pos is not None and pos.shape != model.pos_embed.shape and pos.ndim == 3 and pos.shape[-1] == model.embed_dim:
        # The table is the fixed sinusoid (never trained): for another input size it is that size's table, as the
        # official model built for the size has. Anything else is not that table and is refused.
        from .backbones.t2t import sinusoid_table
        if not torch.allclose(pos.float(), sinusoid_table(pos.shape[1], pos.shape[2]), atol=1e-6, rtol=0):
            raise CheckpointError(f"EAMLP pos_embed {tuple(pos.shape)} is not the fixed sinusoid table, so it cannot "
                                  f"be rebuilt for the model's {tuple(model.pos_embed.shape)}; build the model with "
                                  f"the checkpoint's img_size.")
        out["pos_embed"] = model.pos_embed.detach().clone()
    return out


def convert_zoo(sd, model):
    """Zoo layout: keys as ``model.state_dict()``; only the position embedding is resampled to the grid."""
    if _is_segmentor(model):
        key, trunk = "backbone.trunk.pos_embed", model.backbone.trunk
    elif hasattr(model, "patch_embed") and hasattr(model, "pos_embed"):
        key, trunk = "pos_embed", model
    else:
        return sd
    if key in sd and sd[key].shape != trunk.pos_embed.shape and getattr(trunk, "mixer_name", None) != "ff":
        sd = dict(sd)
        sd[key] = _fit_pos_embed(sd[key], trunk)
    return sd


CONVERTERS = {
    "zoo": convert_zoo,
    "timm_vit": convert_timm_vit,
    "ff_official": convert_ff_official,
    "mmseg_vit": convert_mmseg_vit,
    "eamlp_t2t": convert_eamlp_t2t,
}


def convert_state_dict(sd, model, drop_distillation=False, layout=None, source="checkpoint"):
    """Recognise the layout of ``sd`` and return it in the zoo layout of ``model`` (not yet loaded).

    Args:
        sd: Unwrapped state dict.
        model: The zoo model that will receive it.
        drop_distillation: See ``convert_timm_vit``.
        layout: The layout the caller expects (a key of ``CONVERTERS``); a file in another layout is an error
            naming both (e.g. an FF checkpoint served where mmseg weights were expected).
        source: Name of the file, for messages.

    Returns:
        (layout name, converted state dict).
    """
    found = detect_layout(sd)
    if layout is not None:
        if layout not in CONVERTERS:
            raise ValueError(f"unknown checkpoint layout {layout!r}; layouts: {', '.join(CONVERTERS)}")
        if found != layout:
            raise CheckpointError(f"{source} is a {LAYOUT_NAMES[found]} checkpoint ({found} layout), not the expected "
                                  f"{LAYOUT_NAMES[layout]} ({layout}); first keys: {', '.join(list(sd)[:5])}")
    try:
        if found == "timm_vit":
            return found, convert_timm_vit(sd, model, drop_distillation=drop_distillation)
        return found, CONVERTERS[found](sd, model)
    except CheckpointError as e:
        if source in str(e):
            raise
        raise CheckpointError(f"{source} ({found} layout): {e}") from e


# -- strict loading -----------------------------------------------------------------------------------------------
def load_checkpoint(model, checkpoint, drop_head=False, drop_distillation=False, layout=None, key=None):
    """Load a local weights file (any recognised layout) into ``model``, strictly.

    Args:
        model: A zoo model (e.g. from ``zoo.load(name)``).
        checkpoint: Path to a ``.safetensors`` / ``.pth`` file, a published folder, an mmengine checkpoint written
            by ``tools/train.py`` (the zoo model's weights are taken from the task model's, see
            ``zoo.checkpoint.model_state``), or an in-memory state dict.
        drop_head: Keep the model's own head when the checkpoint's ``head.*`` has another size (or the model has no
            head); without it a head mismatch is an error.
        drop_distillation: Accept a distilled DeiT checkpoint by dropping its distillation token and head.
        layout: Expected layout (a key of ``CONVERTERS``); default: recognised from the keys.
        key: Entry of the checkpoint dict holding the tensors (e.g. ``state_dict_ema``); default ``model`` /
            ``state_dict`` / ``model_ema`` / the dict itself.

    Returns:
        The model (weights loaded in place).

    Raises:
        CheckpointError: The file cannot be read, is in another layout than ``layout``, or does not fit (missing /
            unexpected / mismatched keys are listed), or its layout belongs to another mixer or task.
    """
    if isinstance(checkpoint, dict):
        read = ckpt.Checkpoint("state dict", "in memory", unwrap(checkpoint, "state dict", key=key))
    else:
        read = ckpt.read(checkpoint, key=key)
    sd = ckpt.model_state(read, model) if read.training else read.state
    found, sd = convert_state_dict(sd, model, drop_distillation=drop_distillation, layout=layout,
                                   source=read.where())
    try:
        ckpt.load_state_dict(model, dict(sd), read.path, f"{read.format}, {found} layout", drop_head=drop_head)
    except ckpt.WeightsMismatchError as e:
        written = (read.meta.get("zoo_name"), read.meta.get("zoo_task"))  # the header zoo.save_pretrained writes
        zc = getattr(model, "zoo_config", {})
        if written[0] and written != (zc.get("name"), zc.get("task")):
            raise ckpt.ArchitectureMismatchError(
                f"{read.where()} holds weights of {written[0]} (task {written[1]}), not of {zc.get('name')} (task "
                f"{zc.get('task')}); load it with zoo.load({written[0]!r}, task={written[1]!r}, ...).\n{e}") from None
        raise
    return model


def convert_file(src, model, drop_head=False, drop_distillation=False, layout=None, key=None):
    """Load ``src`` into ``model`` and return the model's state dict (the zoo layout, ready to save)."""
    load_checkpoint(model, src, drop_head=drop_head, drop_distillation=drop_distillation, layout=layout, key=key)
    return {k: v.detach().contiguous() for k, v in model.state_dict().items()}
