"""Official checkpoint layouts -> zoo layout, and strict loading of a local weights file into a zoo model.

``load_checkpoint(model, path)`` reads a file (``.safetensors``, or ``.pth``/``.pt``/``.bin`` with
``torch.load(weights_only=True)``), unwraps it (``model`` / ``state_dict`` / ``module.``), recognises the layout
by its keys and converts it:

- **zoo** -- keys exactly ``model.state_dict()`` (what ``zoo.save_pretrained`` and ``tools/convert.py`` write).
- **timm / DeiT ViT** (Dosovitskiy et al., ViT, https://arxiv.org/abs/2010.11929; Touvron et al., DeiT,
  https://arxiv.org/abs/2012.12877; timm ``vision_transformer.py``) into ``sa_vit_*``: the same names except
  ``blocks.N.attn.*`` -> ``blocks.N.mixer.*``. Position embeddings are bicubically resampled when the grid
  differs. Distilled DeiT (``dist_token``, ``head_dist``) is refused unless ``drop_distillation=True``.
- **FF-only official release** (Melas-Kyriazi, "Do You Even Need Attention?", https://arxiv.org/abs/2105.02723;
  lukemelas/do-you-even-need-attention ``linear-{tiny,base}-checkpoint.pth``) into ``ff_vit_*``. The official
  block is ``x + mlp1(norm1(x))`` (channel MLP) then ``x + mlp2(norm2(x^T))^T`` (token LayerNorm over N and
  token MLP), so::

      blocks.i.norm1, blocks.i.mlp1.fc{1,2}  ->  blocks.i.norm2, blocks.i.mlp.fc{1,2}      (channel)
      blocks.i.norm2, blocks.i.mlp2.fc{1,2}  ->  blocks.i.mixer.norm, blocks.i.mixer.fc{1,2}  (token)
      pos_encoding.cls_pos_embed (1, 1, E) ++ pos_encoding.pos_embed (1, E, gh, gw) -> pos_embed (1, 1 + gh*gw, E)

  The official forward adds ``cls_pos_embed`` to the cls token and the row-major flattened grid embedding to
  the patch tokens, exactly what the zoo trunk does with the concatenation. The token-MLP weights are shaped by
  N, so a model built for another token count cannot take them (a clear error says so).

Loading is strict: any missing, unexpected or wrongly shaped key raises ``CheckpointError`` listing them. A head of
another size (e.g. 1000-class weights into ``num_classes=10``) is dropped only when ``drop_head=True`` (timm's
behaviour when ``num_classes`` differs); the model keeps its freshly initialised head.
"""
import argparse
import os
import re

import torch

from .layers import resample_pos_embed

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class CheckpointError(RuntimeError):
    """A checkpoint does not fit the model (lists missing, unexpected and mismatched keys)."""


# -- reading ------------------------------------------------------------------------------------------------------
def read_state_dict(path):
    """Read a weights file into a flat ``{name: tensor}``, unwrapping ``model`` / ``state_dict`` / ``module.``.

    Args:
        path: A ``.safetensors`` file, a torch file (read with ``weights_only=True``), or a published folder
            holding ``model.safetensors``.

    Returns:
        dict mapping parameter names to tensors.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        for name in WEIGHT_FILES:
            if os.path.isfile(os.path.join(path, name)):
                path = os.path.join(path, name)
                break
        else:
            raise FileNotFoundError(f"{path} is a folder without {' or '.join(WEIGHT_FILES)}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint file not found: {path}")
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file
        sd = load_file(path, device="cpu")
    else:
        try:
            # DeiT-style training checkpoints (the FF release among them) also pickle their argparse ``args``; a
            # Namespace of plain values is safe to rebuild, so it is the one class allowed beyond tensors.
            with torch.serialization.safe_globals([argparse.Namespace]):
                sd = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # pickles with arbitrary objects are refused by weights_only
            raise CheckpointError(
                f"could not read {path} with torch.load(weights_only=True): {e}. Only plain tensor checkpoints are "
                f"read (no arbitrary pickled objects); re-save the state dict with torch.save(model.state_dict()) "
                f"or as safetensors.") from e
    return unwrap(sd, source=path)


def unwrap(sd, source="checkpoint"):
    """Return the tensor dict inside a checkpoint: ``sd['model']``, ``sd['state_dict']``, or ``sd`` itself.

    A ``module.`` prefix on every key (DataParallel / DDP) is removed.
    """
    if not isinstance(sd, dict):
        raise CheckpointError(f"{source}: expected a dict of tensors, got {type(sd).__name__}")
    for wrapper in ("model", "state_dict", "model_ema"):
        if isinstance(sd.get(wrapper), dict):
            sd = sd[wrapper]
            break
    tensors = {k: v for k, v in sd.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise CheckpointError(f"{source}: no tensors found (top-level keys: {', '.join(map(str, list(sd)[:10]))})")
    if all(k.startswith("module.") for k in tensors):
        tensors = {k[len("module."):]: v for k, v in tensors.items()}
    return tensors


# -- layout sniffing ----------------------------------------------------------------------------------------------
def detect_layout(sd):
    """Name the layout of a state dict: ``timm_vit``, ``ff_official`` or ``zoo``."""
    keys = list(sd)
    if any(re.match(r"blocks\.\d+\.attn\.", k) for k in keys):
        return "timm_vit"
    if "pos_encoding.pos_embed" in sd or any(re.match(r"blocks\.\d+\.mlp[12]\.", k) for k in keys):
        return "ff_official"
    return "zoo"


def _mixer_of(model):
    return getattr(model, "mixer_name", None) or getattr(model, "zoo_config", {}).get("name", "?").split("_")[0]


def _model_name(model):
    return getattr(model, "zoo_config", {}).get("name", type(model).__name__)


# -- conversions --------------------------------------------------------------------------------------------------
def _target_grid(model):
    return tuple(model.patch_embed.grid_size)


def _fit_pos_embed(pos, model, source_grid=None):
    """Resample a (1, prefix + n, E) position embedding to the model's grid when the patch count differs."""
    target = model.pos_embed
    if pos.shape == target.shape and source_grid in (None, _target_grid(model)):
        return pos
    if pos.shape[-1] != target.shape[-1]:
        return pos  # a width mismatch is reported by the strict check
    prefix = getattr(model, "num_prefix_tokens", 1)
    return resample_pos_embed(pos, _target_grid(model), prefix, old_size=source_grid)


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
    for k, v in sd.items():
        if distilled and (k == "dist_token" or k.startswith("head_dist.")):
            continue
        k = re.sub(r"^(blocks\.\d+)\.attn\.", r"\1.mixer.", k)
        if k == "pos_embed" and distilled:
            v = torch.cat([v[:, :1], v[:, 2:]], dim=1)  # drop the dist token's row: (1, 2 + n, E) -> (1, 1 + n, E)
        if k == "pos_embed":
            v = _fit_pos_embed(v, model)
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
    if norm_key is not None and sd[norm_key].shape[0] != model.num_tokens:
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
        out["pos_embed"] = _fit_pos_embed(pos, model, source_grid=grid)
    return out


def convert_zoo(sd, model):
    """Zoo layout: keys as ``model.state_dict()``; only the position embedding is resampled to the grid."""
    if "pos_embed" in sd and hasattr(model, "pos_embed") and hasattr(model, "patch_embed"):
        pos = sd["pos_embed"]
        if pos.shape != model.pos_embed.shape and getattr(model, "mixer_name", None) != "ff":
            sd = dict(sd, pos_embed=_fit_pos_embed(pos, model))
    return sd


def convert_state_dict(sd, model, drop_distillation=False):
    """Recognise the layout of ``sd`` and return it in the zoo layout of ``model`` (not yet loaded).

    Returns:
        (layout name, converted state dict).
    """
    layout = detect_layout(sd)
    if layout == "timm_vit":
        return layout, convert_timm_vit(sd, model, drop_distillation=drop_distillation)
    if layout == "ff_official":
        return layout, convert_ff_official(sd, model)
    return layout, convert_zoo(sd, model)


# -- strict loading -----------------------------------------------------------------------------------------------
def _head_keys(model):
    return {k for k in model.state_dict() if k.startswith("head.")}


def check_state_dict(model, sd, source="checkpoint", layout="zoo", drop_head=False):
    """Compare ``sd`` with ``model.state_dict()``; raise ``CheckpointError`` naming every difference.

    With ``drop_head``, checkpoint ``head.*`` entries that do not fit the model's head are removed from ``sd``
    (in place) and the model's own head is kept.
    """
    own = model.state_dict()
    if drop_head:
        for k in [k for k in sd if k.startswith("head.")]:
            if k not in own or own[k].shape != sd[k].shape:
                del sd[k]
        missing_ok = {k for k in _head_keys(model) if k not in sd}
    else:
        missing_ok = set()
    missing = sorted(k for k in own if k not in sd and k not in missing_ok)
    unexpected = sorted(k for k in sd if k not in own)
    mismatched = sorted(f"{k}: checkpoint {tuple(sd[k].shape)} vs model {tuple(own[k].shape)}"
                        for k in sd if k in own and sd[k].shape != own[k].shape)
    if missing or unexpected or mismatched:
        lines = [f"{source} ({layout} layout) does not fit {_model_name(model)}:"]
        if missing:
            lines.append(f"  missing keys ({len(missing)}): {', '.join(missing)}")
        if unexpected:
            lines.append(f"  unexpected keys ({len(unexpected)}): {', '.join(unexpected)}")
        if mismatched:
            lines.append(f"  mismatched shapes ({len(mismatched)}): {'; '.join(mismatched)}")
        if any(k.startswith("head.") for k in missing + unexpected) or any(m.startswith("head.") for m in mismatched):
            lines.append("  The classifier head differs: to keep the model's fresh head (e.g. fine-tuning 1000-class "
                         "weights for num_classes=10) pass drop_head=True to zoo.convert.load_checkpoint.")
        raise CheckpointError("\n".join(lines))


def load_checkpoint(model, checkpoint, drop_head=False, drop_distillation=False):
    """Load a local weights file (any recognised layout) into ``model``, strictly.

    Args:
        model: A zoo model (e.g. from ``zoo.load(name)``).
        checkpoint: Path to a ``.safetensors`` / ``.pth`` file or a published folder, or an in-memory state dict.
        drop_head: Keep the model's own head when the checkpoint's ``head.*`` has another size (or the model has no
            head); without it a head mismatch is an error.
        drop_distillation: Accept a distilled DeiT checkpoint by dropping its distillation token and head.

    Returns:
        The model (weights loaded in place).

    Raises:
        CheckpointError: The checkpoint does not fit (missing / unexpected / mismatched keys are listed), or its
            layout belongs to another mixer.
    """
    if isinstance(checkpoint, dict):
        source, sd = "state dict", unwrap(checkpoint)
    else:
        source, sd = os.fspath(checkpoint), read_state_dict(checkpoint)
    layout, sd = convert_state_dict(sd, model, drop_distillation=drop_distillation)
    sd = dict(sd)
    check_state_dict(model, sd, source=source, layout=layout, drop_head=drop_head)
    model.load_state_dict(sd, strict=not drop_head)
    return model


def convert_file(src, model, drop_head=False, drop_distillation=False):
    """Load ``src`` into ``model`` and return the model's state dict (the zoo layout, ready to save)."""
    load_checkpoint(model, src, drop_head=drop_head, drop_distillation=drop_distillation)
    return {k: v.detach().contiguous() for k, v in model.state_dict().items()}
