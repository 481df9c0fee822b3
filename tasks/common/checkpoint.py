"""Loading mmengine checkpoints (resume files, ``load_from``) without unpickling arbitrary objects.

An mmengine ``.pth`` is a pickle. Besides tensors it holds mmengine's ``MessageHub`` state, whose
``HistoryBuffer`` objects carry numpy arrays and a table of their statistics methods (pickled as
``getattr(HistoryBuffer, 'mean')``). On torch >= 2.6 ``torch.load`` defaults to ``weights_only=True`` and refuses
those (docs/training.md, "Loading mmengine checkpoints"); the usual workaround, ``weights_only=False``, runs whatever code a file names.

This module instead keeps ``weights_only=True`` for every file and allowlists only what mmengine itself writes:
``HistoryBuffer``, plain numpy arrays, dtypes and scalars, and a ``getattr`` that resolves nothing but
``HistoryBuffer``'s own statistics methods. A file that names anything else (a downloaded pickle with a payload,
or a checkpoint holding custom objects) fails with torch's message naming the global; nothing is executed. So
the project's own resume files load, and any ``.pth`` from elsewhere is held to the same rules. Weights the
project publishes are safetensors (``zoo.hub``), never pickles.

Importing this module replaces mmengine's loader for local paths (the ``''`` scheme of ``CheckpointLoader``),
which ``Runner.resume`` and ``Runner.load_checkpoint`` use. A file that cannot be read at all (empty, truncated,
not a torch file) raises ``zoo.convert.CheckpointError`` naming it.

``load_strict`` is what ``tools/test.py`` uses instead of mmengine's ``load_from``, which is not strict: a checkpoint
of another mixer or task would be evaluated with freshly initialised layers. It lists the missing, unexpected and
mis-shaped keys and loads nothing unless the checkpoint fits the model exactly.
"""
import os
import pickle
import zipfile

import numpy as np
import torch
from mmengine.logging import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader

from zoo.convert import CheckpointError

# Keys listed per kind in a mismatch message; the rest are counted.
_SHOW_KEYS = 12

_HISTORY_METHODS = ("min", "max", "current", "mean")


def _history_buffer_getattr(obj, name):
    """``getattr`` limited to ``HistoryBuffer``'s statistics methods (what a pickled message hub references)."""
    if obj is HistoryBuffer and name in _HISTORY_METHODS:
        return getattr(obj, name)
    raise pickle.UnpicklingError(f"checkpoint asks for getattr({obj!r}, {name!r}); only HistoryBuffer.{{"
                                  f"{','.join(_HISTORY_METHODS)}}} are allowed")


def _numpy_globals():
    """The numpy callables a pickled ndarray/scalar refers to, under numpy 1.x and 2.x module names."""
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    out = [np.ndarray, np.dtype]
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out += [(multiarray._reconstruct, f"{module}._reconstruct"), (multiarray.scalar, f"{module}.scalar")]
    # numpy 2 pickles dtypes by class (numpy.dtypes.Float64DType, ...).
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        out += [getattr(dtypes, n) for n in dir(dtypes) if n.endswith("DType")]
    return out


def allowed_globals():
    """Everything beyond torch's own weights-only set that an mmengine checkpoint may name."""
    return [HistoryBuffer, (_history_buffer_getattr, "builtins.getattr"), *_numpy_globals()]


def safe_load(filename, map_location=None):
    """``torch.load(filename, weights_only=True)`` with mmengine's own plain-data classes allowlisted.

    Args:
        filename: A local ``.pth`` file (an mmengine checkpoint or a plain state dict).
        map_location: As for ``torch.load``.

    Returns:
        The loaded object (for mmengine checkpoints, a dict with ``state_dict``, ``meta``, ``optimizer``,
        ``message_hub``, ``param_schedulers``).

    Raises:
        FileNotFoundError: ``filename`` does not exist.
        pickle.UnpicklingError: The file names a global outside the allowlist (it is not loaded).
        CheckpointError: The file is empty, truncated or not a torch file (the message names it).
    """
    filename = os.path.expanduser(str(filename))
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"checkpoint {filename} not found")
    try:
        with torch.serialization.safe_globals(allowed_globals()):
            return torch.load(filename, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        raise  # a global outside the allowlist: torch's message already names it and says what to do
    except (EOFError, RuntimeError, OSError, KeyError, ValueError, zipfile.BadZipFile) as e:
        raise CheckpointError(_unreadable(filename, e)) from e


def _unreadable(filename, error):
    """The message for a file ``torch.load`` cannot parse: what the file is, what torch said, what to do."""
    size = os.path.getsize(filename)
    if size == 0:
        what = "the file is empty (0 bytes)"
    elif "central directory" in str(error) or isinstance(error, (EOFError, OSError, zipfile.BadZipFile)):
        what = f"the file ({size} bytes) is truncated or is not a torch checkpoint"
    else:
        what = f"the file ({size} bytes) is not a readable torch checkpoint"
    return (f"cannot load checkpoint {filename}: {what} ({type(error).__name__}: {error}). An interrupted save or "
            f"copy leaves such a file; use another checkpoint (work_dir/last_checkpoint names the newest) or copy it "
            f"again.")


def _unwrap(model):
    """The module that owns the weights: without DDP wrappers and test-time-augmentation wrappers."""
    from mmengine.model import BaseTTAModel, is_model_wrapper
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    return model


def _listing(kind, items):
    more = f", ... ({len(items) - _SHOW_KEYS} more)" if len(items) > _SHOW_KEYS else ""
    return f"{len(items)} {kind}: {', '.join(items[:_SHOW_KEYS])}{more}"


def check_fits(model, checkpoint, filename):
    """Raise ``CheckpointError`` unless ``checkpoint``'s weights fit ``model`` exactly.

    Args:
        model: The model the Runner built (wrappers are looked through).
        checkpoint: What ``safe_load`` returned: an mmengine checkpoint (``state_dict``, ``meta``, ...) or a plain
            state dict. A ``module.`` prefix (a DDP-wrapped save) is ignored, as mmengine's loader does.
        filename: The file, for the message.

    Raises:
        CheckpointError: Lists the missing keys, the unexpected keys and the shape mismatches (``num_batches_tracked``
            counters may be missing, as mmengine allows).
    """
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        found = sorted(checkpoint)[:10] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(f"{filename} holds no state dict of tensors (top level: {found}); tools/test.py needs "
                              f"a checkpoint written by tools/train.py.")
    state = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}
    model = _unwrap(model)
    own = model.state_dict()
    missing = sorted(k for k in own if k not in state and not k.endswith("num_batches_tracked"))
    unexpected = sorted(k for k in state if k not in own)
    shapes = sorted(f"{k} {tuple(state[k].shape)} vs {tuple(own[k].shape)}" for k in state
                    if k in own and state[k].shape != own[k].shape)
    if not (missing or unexpected or shapes):
        return
    name = getattr(getattr(model, "zoo_model", model), "zoo_config", {}).get("name", type(model).__name__)
    meta = checkpoint.get("meta") if isinstance(checkpoint, dict) else None
    run = meta.get("experiment_name") if isinstance(meta, dict) else None
    trained = f" (trained as {run})" if run else ""
    parts = [_listing(k, v) for k, v in (("missing keys", missing), ("unexpected keys", unexpected),
                                         ("shape mismatches (checkpoint vs model)", shapes)) if v]
    raise CheckpointError(f"checkpoint {filename}{trained} does not fit the config's model ({name}): "
                          f"{'; '.join(parts)}. It was written for another mixer, size or task; evaluate it with the "
                          f"config it was trained with.")


def load_strict(runner, filename):
    """Load ``filename`` into ``runner.model`` only if it fits exactly (``check_fits``), then as mmengine would.

    Args:
        runner: A built mmengine ``Runner`` (its model may be DDP- or TTA-wrapped).
        filename: A local checkpoint file.

    Returns:
        The loaded checkpoint dict.

    Raises:
        FileNotFoundError, CheckpointError: see ``safe_load`` and ``check_fits``.
    """
    check_fits(runner.model, safe_load(filename, map_location="cpu"), filename)
    # The Runner's own loader (the file is read a second time: small next to an evaluation) keeps its hooks and
    # dataset-meta handling; strict, should anything differ from what check_fits saw.
    return runner.load_checkpoint(filename, map_location="cpu", strict=True)


@CheckpointLoader.register_scheme(prefixes="", force=True)
def load_from_local(filename, map_location):
    """mmengine's loader for local paths, replaced by ``safe_load`` (see the module docstring)."""
    return safe_load(filename, map_location=map_location)
