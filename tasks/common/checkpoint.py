"""Loading mmengine checkpoints (resume files, ``load_from``) without unpickling arbitrary objects.

An mmengine ``.pth`` is a pickle. Besides tensors it holds mmengine's ``MessageHub`` state, whose
``HistoryBuffer`` objects carry numpy arrays and a table of their statistics methods (pickled as
``getattr(HistoryBuffer, 'mean')``). On torch >= 2.6 ``torch.load`` defaults to ``weights_only=True`` and refuses
those (shared/NOTES.md, problem 2); the usual workaround, ``weights_only=False``, runs whatever code a file names.

This module instead keeps ``weights_only=True`` for every file and allowlists only what mmengine itself writes:
``HistoryBuffer``, plain numpy arrays, dtypes and scalars, and a ``getattr`` that resolves nothing but
``HistoryBuffer``'s own statistics methods. A file that names anything else (a downloaded pickle with a payload,
or a checkpoint holding custom objects) fails with torch's message naming the global; nothing is executed. So
the project's own resume files load, and any ``.pth`` from elsewhere is held to the same rules. Weights the
project publishes are safetensors (``zoo.hub``), never pickles.

Importing this module replaces mmengine's loader for local paths (the ``''`` scheme of ``CheckpointLoader``),
which ``Runner.resume`` and ``Runner.load_checkpoint`` use.
"""
import os
import pickle

import numpy as np
import torch
from mmengine.logging import HistoryBuffer
from mmengine.runner.checkpoint import CheckpointLoader

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
    """
    filename = os.path.expanduser(str(filename))
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"checkpoint {filename} not found")
    with torch.serialization.safe_globals(allowed_globals()):
        return torch.load(filename, map_location=map_location, weights_only=True)


@CheckpointLoader.register_scheme(prefixes="", force=True)
def load_from_local(filename, map_location):
    """mmengine's loader for local paths, replaced by ``safe_load`` (see the module docstring)."""
    return safe_load(filename, map_location=map_location)
