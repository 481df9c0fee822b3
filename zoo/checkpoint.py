"""Reading weights files and checking them against a model: the one checkpoint I/O layer of the zoo.

Everything that reads weights from disk goes through here: ``zoo.load(checkpoint=...)`` (via ``zoo.convert``, which
adds the foreign layouts), ``local-dir:`` and ``hf-hub:`` folders and pretrained tags (``zoo.hub``), the training
tools (``tasks.common.checkpoint``: mmengine's loader, ``tools/test.py``) and ``tools/publish.py``.

- ``read(path)`` reads one file into a ``Checkpoint`` (flat ``{name: tensor}``, metadata, the format it was read as).
  A ``.safetensors`` file (or any file that is not a torch pickle) is read as safetensors. A ``.pth`` / ``.pt`` /
  ``.bin`` file is only ever read with ``torch.load(weights_only=True)`` and the allowlist of ``allowed_globals``:
  a file naming anything else is refused, nothing in it is executed.
- An mmengine checkpoint written by ``tools/train.py`` (``state_dict``, ``meta``, ``message_hub``, ``optimizer``,
  ...) is recognised; ``model_state(checkpoint, model)`` keeps the weights of the zoo model inside the task model
  that was trained (e.g. ``classifier.*`` of the classification wrapper, ``model.*`` of the point models, the whole
  state of the segmentor and the GAN) and drops the training state.
- ``check_state_dict(model, state, ...)`` is the one strict comparison: missing, unexpected and mis-shaped keys.
- Every failure is a ``CheckpointError`` (or a subclass) whose message names the file, the format it was read as
  and what is wrong.
"""
import argparse
import os
import pickle
import zipfile
from dataclasses import dataclass, field

SAFETENSORS = "safetensors"
TORCH = "torch file, weights_only"
TRAINING = "mmengine training checkpoint"
TORCH_SUFFIXES = (".pth", ".pt", ".bin", ".pth.tar", ".ckpt")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Where checkpoints of other tools keep their tensors, tried in this order (timm / DeiT: ``model``, ``model_ema``).
WRAPPERS = ("model", "state_dict", "model_ema")
# Keys listed per kind in a mismatch message; the rest are counted.
SHOW_KEYS = 8


class CheckpointError(RuntimeError):
    """Weights cannot be read or do not fit the model; the message names the file, its format and the cause.

    The base of every weights error of the zoo (``zoo.hub.HubError``, ``zoo.upstream.UpstreamError`` and the
    classes below derive from it), so ``except zoo.CheckpointError`` catches them all.
    """


class UnsafeCheckpointError(CheckpointError, pickle.UnpicklingError):
    """A torch file names a Python global outside the allowlist; it was not loaded."""


class ChecksumError(CheckpointError):
    """The sha256 of a weights file differs from the pinned or recorded one."""


class ArchitectureMismatchError(CheckpointError):
    """The weights were written for another model than the one described or being filled."""


class WeightsMismatchError(CheckpointError):
    """The weights do not fit the model: missing, unexpected or mis-shaped keys."""


@dataclass
class Checkpoint:
    """One weights file as read: ``state`` maps names to tensors; ``meta`` is the safetensors header metadata or an
    mmengine checkpoint's ``meta``; ``format`` says how it was read (``SAFETENSORS``, ``TORCH`` or ``TRAINING``)."""
    path: str
    format: str
    state: dict
    meta: dict = field(default_factory=dict)

    @property
    def training(self):
        return self.format == TRAINING

    def where(self):
        """``path (format)``, the start of every message about this file."""
        return f"{self.path} ({self.format})"


# -- the allowlist ------------------------------------------------------------------------------------------------
class _HistoryRecord:
    """Stands in for mmengine's ``HistoryBuffer`` when mmengine is not installed: a training checkpoint's message
    hub then reads as inert records (its state is kept, never used)."""

    def __setstate__(self, state):
        self.state = state

    def min(self):  # the statistics methods a pickled HistoryBuffer refers to (never called here)
        return None

    max = current = mean = min


_HISTORY_METHODS = ("min", "max", "current", "mean")


def _history_buffer():
    try:
        from mmengine.logging import HistoryBuffer
    except ImportError:
        return _HistoryRecord
    return HistoryBuffer


def _history_getattr(obj, name):
    """``getattr`` limited to the history buffer's statistics methods (what a pickled message hub references)."""
    if obj is _history_buffer() and name in _HISTORY_METHODS:
        return getattr(obj, name)
    raise pickle.UnpicklingError(f"the file asks for getattr({obj!r}, {name!r}); only HistoryBuffer."
                                 f"{{{','.join(_HISTORY_METHODS)}}} are allowed")


def _numpy_globals():
    """The numpy callables a pickled ndarray or scalar refers to, under numpy 1.x and 2.x module names."""
    import numpy as np
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    out = [np.ndarray, np.dtype]
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out += [(multiarray._reconstruct, f"{module}._reconstruct"), (multiarray.scalar, f"{module}.scalar")]
    dtypes = getattr(np, "dtypes", None)  # numpy 2 pickles dtypes by class (numpy.dtypes.Float64DType, ...)
    if dtypes is not None:
        out += [getattr(dtypes, n) for n in dir(dtypes) if n.endswith("DType")]
    return out


def allowed_globals():
    """Everything beyond torch's own weights-only set that a torch file may name (the zoo's one allowlist).

    - ``argparse.Namespace``: DeiT-style and timm ``CheckpointSaver`` files pickle their plain-valued ``args``.
    - What mmengine writes into a training checkpoint's message hub: ``HistoryBuffer`` (mmengine's own class, or an
      inert stand-in without mmengine), a ``getattr`` that resolves only its statistics methods, and plain numpy
      arrays, dtypes and scalars.
    """
    return [argparse.Namespace, (_history_buffer(), "mmengine.logging.history_buffer.HistoryBuffer"),
            (_history_getattr, "builtins.getattr"), *_numpy_globals()]


# -- reading ------------------------------------------------------------------------------------------------------
def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _is_torch_file(path):
    """A torch file starts as a zip (``torch.save``) or a pickle (legacy format); safetensors with a header size."""
    with open(path, "rb") as f:
        head = f.read(4)
    return head.startswith(b"PK") or head[:1] == b"\x80"


def resolve_file(path):
    """``path`` itself, or the weights file of a published folder; a missing file is a ``FileNotFoundError``."""
    path = os.path.expanduser(os.fspath(path))
    if os.path.isdir(path):
        for name in WEIGHT_FILES:
            if os.path.isfile(os.path.join(path, name)):
                return os.path.join(path, name)
        raise FileNotFoundError(f"{path} is a folder without {' or '.join(WEIGHT_FILES)}")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint file not found: {path}")
    return path


def _empty(path, fmt):
    if _size(path) == 0:
        raise CheckpointError(f"cannot load checkpoint {path} ({fmt}): the file is empty (0 bytes); an interrupted "
                              f"save, copy or download leaves such a file. Write or fetch it again.")


def safetensors_metadata(path):
    """The header metadata of a safetensors file (``{}`` if it has none), without reading the tensors."""
    from safetensors import SafetensorError, safe_open
    _empty(path, SAFETENSORS)
    try:
        with safe_open(path, framework="pt") as f:
            return f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(_bad_safetensors(path, e)) from None


def _bad_safetensors(path, error):
    text = str(error)
    if "header" in text.lower() and ("too large" in text.lower() or "json" in text.lower() or "utf" in text.lower()):
        what = "its header is not a valid safetensors header"
    else:
        what = "the file is truncated or corrupted"
    return (f"cannot load checkpoint {path} ({SAFETENSORS}, {_size(path)} bytes): {what} ({text}). An interrupted "
            f"save or download leaves such a file; write or download it again.")


def write_safetensors(state, path, metadata=None):
    """Write ``state`` as safetensors whose bytes depend only on the tensors and ``metadata``.

    ``safetensors.torch.save_file`` writes the metadata in a hash map's order, which changes from process to
    process, so the same weights saved twice would get two sha256s. Here the header is written again with the
    metadata keys sorted (tensor entries and data as safetensors laid them out, the header padded to 8 bytes as
    safetensors does).
    """
    import json

    from safetensors.torch import save
    raw = save(state, metadata=metadata)
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", None)
    ordered = {"__metadata__": dict(sorted(meta.items()))} if meta else {}
    ordered.update(header)
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        f.write(raw[8 + n:])


def read_safetensors(path):
    """``(tensors, metadata)`` of a safetensors file, on the CPU."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    meta = safetensors_metadata(path)
    try:
        return load_file(path, device="cpu"), meta
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(_bad_safetensors(path, e)) from None


def load_torch(path, map_location="cpu"):
    """``torch.load(path, weights_only=True)`` with ``allowed_globals``; the loaded object.

    Raises:
        UnsafeCheckpointError: The file names a global outside the allowlist (listed; nothing was executed).
        CheckpointError: The file is empty, truncated or not a torch file.
    """
    import torch
    path = os.fspath(path)
    _empty(path, TORCH)
    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:  # a global outside the allowlist: say which, never fall back to full pickle
        try:
            refused = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except (RuntimeError, ValueError, OSError, zipfile.BadZipFile, pickle.UnpicklingError):
            refused = []
        allowed = {g[1] if isinstance(g, tuple) else f"{g.__module__}.{g.__qualname__}" for g in allowed_globals()}
        refused = [g for g in refused if g not in allowed]
        what = f"it pickles {', '.join(refused)}" if refused else f"{e}".splitlines()[0]
        raise UnsafeCheckpointError(
            f"cannot load checkpoint {path} ({TORCH}): the file was refused, {what}. Only tensors, plain containers "
            f"and what mmengine writes into a training checkpoint are read, never arbitrary pickled objects; "
            f"re-save the weights with torch.save(model.state_dict()) or as safetensors.") from e
    except (EOFError, RuntimeError, OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise CheckpointError(
            f"cannot load checkpoint {path} ({TORCH}): the file ({_size(path)} bytes) is truncated or is not a "
            f"torch checkpoint ({type(e).__name__}: {e}). An interrupted save or copy leaves such a file; use "
            f"another checkpoint (work_dir/last_checkpoint names the newest) or copy it again.") from e


def is_training_checkpoint(obj):
    """True for what mmengine's Runner saves: ``state_dict`` plus its ``message_hub`` (and ``meta``, optimizer...)."""
    return isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict) and "message_hub" in obj


def unwrap(obj, source="checkpoint", key=None):
    """The tensor dict inside a loaded checkpoint: ``obj[key]``, else ``obj['model']`` / ``['state_dict']`` /
    ``['model_ema']``, else ``obj`` itself. A ``module.`` prefix on every key (DataParallel / DDP) is removed."""
    import torch
    if not isinstance(obj, dict):
        raise CheckpointError(f"{source}: expected a dict of tensors, got {type(obj).__name__}")
    if key is not None:
        if not isinstance(obj.get(key), dict):
            raise CheckpointError(f"{source}: the checkpoint has no entry {key!r} holding tensors (top-level keys: "
                                  f"{', '.join(map(str, list(obj)[:10]))})")
        obj = obj[key]
    else:
        for wrapper in WRAPPERS:
            if isinstance(obj.get(wrapper), dict):
                obj = obj[wrapper]
                break
    tensors = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise CheckpointError(f"{source}: no tensors found (top-level keys: {', '.join(map(str, list(obj)[:10]))})")
    if all(k.startswith("module.") for k in tensors):
        tensors = {k[len("module."):]: v for k, v in tensors.items()}
    return tensors


def read(path, key=None, map_location="cpu"):
    """Read one weights file (or a published folder's) into a ``Checkpoint``.

    Args:
        path: A safetensors file, a torch file, an mmengine training checkpoint, or a folder holding
            ``model.safetensors`` / ``pytorch_model.bin``.
        key: The entry of a torch checkpoint dict that holds the tensors (e.g. ``state_dict_ema``); by default the
            first of ``model``, ``state_dict``, ``model_ema``, else the dict itself.
        map_location: As for ``torch.load``.

    Raises:
        FileNotFoundError: No such file.
        CheckpointError: The file cannot be read (see ``read_safetensors``, ``load_torch``) or holds no tensors.
    """
    path = resolve_file(path)
    torch_file = path.endswith(TORCH_SUFFIXES) or (not path.endswith(".safetensors") and _size(path) > 0
                                                    and _is_torch_file(path))
    if not torch_file:
        state, meta = read_safetensors(path)
        return Checkpoint(path, SAFETENSORS, state, meta)
    obj = load_torch(path, map_location=map_location)
    if key is None and is_training_checkpoint(obj):
        meta = obj.get("meta") if isinstance(obj.get("meta"), dict) else {}
        return Checkpoint(path, TRAINING, unwrap(obj["state_dict"], f"{path} ({TRAINING})"), meta)
    return Checkpoint(path, TORCH, unwrap(obj, f"{path} ({TORCH})", key=key))


# -- from a task model's state to the zoo model's ------------------------------------------------------------------
def _model_name(model):
    model = getattr(model, "zoo_model", model)
    return getattr(model, "zoo_config", {}).get("name", type(model).__name__)


def model_state(checkpoint, model):
    """The weights of ``model`` (a zoo model) inside a training checkpoint's task-model state.

    The task models of ``tasks/`` hold the zoo model as one submodule (``classifier.`` for classification,
    ``model.`` for the point tasks) or are it (the segmentor; the GAN's generator, discriminator and EMA copy). The
    prefix is the one under which most of the model's keys are found; every key under it is kept (so a checkpoint
    of another mixer or size is reported key by key by ``check_state_dict``), the rest is training state (loss
    buffers, the EMA step counter) and is dropped.
    """
    own = model.state_dict()
    counts = {}
    for k in checkpoint.state:
        parts = k.split(".")
        for i in range(len(parts)):
            if ".".join(parts[i:]) in own:
                prefix = ".".join(parts[:i]) + ("." if i else "")
                counts[prefix] = counts.get(prefix, 0) + 1
    if not counts:
        tops = sorted({k.split(".")[0] + "." for k in checkpoint.state})
        raise ArchitectureMismatchError(
            f"cannot load checkpoint {checkpoint.where()} into {_model_name(model)}: none of its weights belong to "
            f"this model (its keys start with {', '.join(tops[:6])}); it was trained for another task or model. "
            f"Load it with the name and task it was trained with, or export its model with tools/publish.py --config "
            f"CFG --checkpoint {checkpoint.path} --repo-id ORG/NAME --metrics METRICS.json --dataset KEY --no-upload "
            f"--out DIR and load local-dir:DIR.")
    prefix = max(sorted(counts), key=lambda p: (counts[p], -len(p)))
    if prefix:
        return {k[len(prefix):]: v for k, v in checkpoint.state.items() if k.startswith(prefix)}
    tops = {k.split(".")[0] for k in own}
    return {k: v for k, v in checkpoint.state.items() if k.split(".")[0] in tops}


# -- the strict check ---------------------------------------------------------------------------------------------
def _listing(label, items):
    more = f", ... ({len(items) - SHOW_KEYS} more)" if len(items) > SHOW_KEYS else ""
    return f"{label} ({len(items)}): {', '.join(items[:SHOW_KEYS])}{more}"


def published_state_dict(model):
    """The weights a published folder of ``model`` holds: ``model.published_state_dict()`` where the model defines
    one (the GAN publishes its EMA generator only), else the whole ``model.state_dict()``."""
    publish = getattr(model, "published_state_dict", None)
    return publish() if publish is not None else model.state_dict()


def _published_subset(model, state):
    """Whether ``state`` holds only the published part of a model that publishes a part (see
    ``published_state_dict``); then it is checked and loaded against that part alone."""
    prefix = getattr(model, "PUBLISHED_PREFIX", None)
    return bool(prefix and state and hasattr(model, "load_published_state_dict")
                and all(k.startswith(prefix) for k in state))


def mismatch(model, state, drop_head=False):
    """``(missing, unexpected, mis-shaped)`` key lists of ``state`` against ``model.state_dict()``.

    ``num_batches_tracked`` counters may be missing (torch's batch norm fills them in, as mmengine allows). With
    ``drop_head``, ``head.*`` entries that do not fit the model are removed from ``state`` (in place) and the
    model's own head may stay.
    """
    own = published_state_dict(model) if _published_subset(model, state) else model.state_dict()
    missing_ok = set()
    if drop_head:
        for k in [k for k in state if k.startswith("head.")]:
            if k not in own or tuple(own[k].shape) != tuple(state[k].shape):
                del state[k]
        missing_ok = {k for k in own if k.startswith("head.") and k not in state}
    missing = sorted(k for k in own if k not in state and k not in missing_ok
                     and not k.endswith("num_batches_tracked"))
    unexpected = sorted(k for k in state if k not in own)
    shapes = sorted(f"{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(own[k].shape)}"
                    for k in state if k in own and tuple(state[k].shape) != tuple(own[k].shape))
    return missing, unexpected, shapes


def check_state_dict(model, state, source, fmt=None, target=None, hint=None, drop_head=False):
    """Raise ``WeightsMismatchError`` unless ``state`` fits ``model`` exactly.

    Args:
        model: The module to fill.
        state: ``{name: tensor}``.
        source: The file (or what the state came from), for the message.
        fmt: The format / layout it was read as, for the message.
        target: How to name the model (default: its zoo name).
        hint: A last line saying what to do (default: about the classifier head, when that differs).
        drop_head: See ``mismatch``.
    """
    missing, unexpected, shapes = mismatch(model, state, drop_head=drop_head)
    if not (missing or unexpected or shapes):
        return
    where = f"{source} ({fmt})" if fmt else str(source)
    lines = [f"checkpoint {where} does not fit {target or _model_name(model)}:"]
    lines += [f"  {_listing(label, items)}" for label, items in (
        ("missing keys", missing), ("unexpected keys", unexpected), ("mismatched shapes", shapes)) if items]
    head = any(k.startswith("head.") for k in missing + unexpected + shapes)
    if hint is None and head:
        hint = ("The classifier head differs: to keep the model's fresh head (e.g. fine-tuning 1000-class weights "
                "for num_classes=10) pass checkpoint_options=dict(drop_head=True) to zoo.load (drop_head=True to "
                "zoo.convert.load_checkpoint).")
    if hint:
        lines.append(f"  {hint}")
    raise WeightsMismatchError("\n".join(lines))


def load_state_dict(model, state, source, fmt=None, **check):
    """``check_state_dict`` then ``model.load_state_dict(state, strict=True)``; returns ``model``.

    A model that publishes part of its weights (``published_state_dict``) also takes a state of just that part,
    checked strictly against it. Floating tensors of another precision (a float16 published folder) are cast to the
    model's own by ``load_state_dict``.
    """
    check_state_dict(model, state, source, fmt, **check)
    if _published_subset(model, state):
        return model.load_published_state_dict(state)
    model.load_state_dict(state, strict=not check.get("drop_head", False))
    return model
