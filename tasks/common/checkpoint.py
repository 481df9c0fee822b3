"""Loading mmengine checkpoints (resume files, ``load_from``) without unpickling arbitrary objects.

An mmengine ``.pth`` is a pickle. Besides tensors it holds mmengine's ``MessageHub`` state, whose
``HistoryBuffer`` objects carry numpy arrays and a table of their statistics methods (pickled as
``getattr(HistoryBuffer, 'mean')``). On torch >= 2.6 ``torch.load`` defaults to ``weights_only=True`` and refuses
those (docs/training.md, "Loading mmengine checkpoints"); the usual workaround, ``weights_only=False``, runs whatever
code a file names.

Every file is instead read by the zoo's one reader, ``zoo.checkpoint.load_torch``: ``weights_only=True`` with one
allowlist (``zoo.checkpoint.allowed_globals``) holding only what mmengine itself writes: ``HistoryBuffer``, plain
numpy arrays, dtypes and scalars, and a ``getattr`` that resolves nothing but ``HistoryBuffer``'s own statistics
methods. A file that names anything else (a downloaded pickle with a payload, or a checkpoint holding custom
objects) fails with ``zoo.checkpoint.UnsafeCheckpointError`` (a ``pickle.UnpicklingError``) naming the global;
nothing is executed. So the project's own resume files load, and any ``.pth`` from elsewhere is held to the same
rules. Weights the project publishes are safetensors (``zoo.hub``), never pickles.

Importing this module replaces mmengine's loader for local paths (the ``''`` scheme of ``CheckpointLoader``),
which ``Runner.resume`` and ``Runner.load_checkpoint`` use. A file that cannot be read at all (empty, truncated,
not a torch file) raises ``zoo.CheckpointError`` naming it and the format it was read as.

``load_strict`` is what ``tools/test.py`` uses instead of mmengine's ``load_from``, which is not strict: a checkpoint
of another mixer or task would be evaluated with freshly initialised layers. It lists the missing, unexpected and
mis-shaped keys (``zoo.checkpoint.check_state_dict``) and loads nothing unless the checkpoint fits the model exactly.
"""
import os

import torch
from mmengine.runner.checkpoint import CheckpointLoader

from zoo import checkpoint as zoo_checkpoint
from zoo.checkpoint import CheckpointError


def safe_load(filename, map_location=None):
    """``torch.load(filename, weights_only=True)`` with the zoo's allowlist (``zoo.checkpoint.load_torch``).

    Args:
        filename: A local ``.pth`` file (an mmengine checkpoint or a plain state dict).
        map_location: As for ``torch.load``.

    Returns:
        The loaded object (for mmengine checkpoints, a dict with ``state_dict``, ``meta``, ``optimizer``,
        ``message_hub``, ``param_schedulers``).

    Raises:
        FileNotFoundError: ``filename`` does not exist.
        zoo.checkpoint.UnsafeCheckpointError: The file names a global outside the allowlist (it is not loaded); a
            ``pickle.UnpicklingError``, as mmengine's callers expect.
        CheckpointError: The file is empty, truncated or not a torch file (the message names it).
    """
    filename = os.path.expanduser(str(filename))
    if not os.path.isfile(filename):
        raise FileNotFoundError(f"checkpoint {filename} not found")
    return zoo_checkpoint.load_torch(filename, map_location=map_location)


def _unwrap(model):
    """The module that owns the weights: without DDP wrappers and test-time-augmentation wrappers."""
    from mmengine.model import BaseTTAModel, is_model_wrapper
    while is_model_wrapper(model) or isinstance(model, BaseTTAModel):
        model = model.module
    return model


def check_fits(model, checkpoint, filename):
    """Raise ``CheckpointError`` unless ``checkpoint``'s weights fit ``model`` exactly.

    Args:
        model: The model the Runner built (wrappers are looked through).
        checkpoint: What ``safe_load`` returned: an mmengine checkpoint (``state_dict``, ``meta``, ...) or a plain
            state dict. A ``module.`` prefix (a DDP-wrapped save) is ignored, as mmengine's loader does.
        filename: The file, for the message.

    Raises:
        CheckpointError: Lists the missing keys, the unexpected keys and the shape mismatches
            (``zoo.checkpoint.check_state_dict``; ``num_batches_tracked`` counters may be missing, as mmengine allows).
    """
    training = zoo_checkpoint.is_training_checkpoint(checkpoint)
    fmt = zoo_checkpoint.TRAINING if training else zoo_checkpoint.TORCH
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        found = sorted(checkpoint)[:10] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise CheckpointError(f"checkpoint {filename} ({fmt}) holds no state dict of tensors (top level: {found}); "
                              f"tools/test.py needs a checkpoint written by tools/train.py.")
    state = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}
    model = _unwrap(model)
    name = getattr(getattr(model, "zoo_model", model), "zoo_config", {}).get("name", type(model).__name__)
    meta = checkpoint.get("meta") if isinstance(checkpoint, dict) else None
    run = meta.get("experiment_name") if isinstance(meta, dict) else None
    zoo_checkpoint.check_state_dict(
        model, state, filename, f"{fmt}, trained as {run}" if run else fmt, target=f"the config's model ({name})",
        hint="It was written for another mixer, size or task; evaluate it with the config it was trained with.")


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
