"""A stand-in ``mmcv._ext`` so that mmsegmentation imports with ``mmcv-lite`` (no compiled ops).

mmseg 1.2.2 imports ``mmcv.ops`` unguarded in a few modules (losses, point heads); ``mmcv.ops`` loads the compiled
extension ``mmcv._ext`` and fails with ``No module named 'mmcv._ext'`` under ``mmcv-lite``. None of the modules the
zoo uses (ViT adapter, ``MultiLevelNeck``, ``UPerHead``, ``FCNHead``, cross-entropy) calls a compiled op, so a
placeholder module is enough to import mmseg. Any op looked up on it is a function that raises a ``RuntimeError``
naming the op, so nothing silently runs without its kernel.

``install()`` does nothing when the real compiled ops are importable (full ``mmcv``). The placeholder carries a
``__spec__`` whose loader is ``None``: mmengine's Runner inspects ``sys.modules`` specs while collecting its
environment report and trips over a module without one.
"""
import importlib.machinery
import importlib.util
import sys
import types

NAME = "mmcv._ext"


class _MissingOps(types.ModuleType):
    """Module whose every public attribute is an op that raises ``RuntimeError`` when called."""

    def __getattr__(self, op):
        if op.startswith("__") and op.endswith("__"):  # import machinery probes (__path__, __file__, ...)
            raise AttributeError(op)

        def missing(*args, **kwargs):
            raise RuntimeError(
                f"mmcv op {op!r} needs the compiled mmcv extension (mmcv._ext), which mmcv-lite does not ship. The "
                f"zoo's segmentation models do not use it; for models that do, install the full mmcv build matching "
                f"your torch/CUDA (https://mmcv.readthedocs.io/en/latest/get_started/installation.html).")

        missing.__name__ = op
        return missing


def has_real_ops():
    """True when a compiled ``mmcv._ext`` is importable (full mmcv), False under mmcv-lite."""
    existing = sys.modules.get(NAME)
    if existing is not None:
        return not isinstance(existing, _MissingOps)
    try:
        return importlib.util.find_spec(NAME) is not None
    except (ImportError, ValueError):
        return False


def install():
    """Register the placeholder as ``mmcv._ext`` unless the real ops exist. Returns True if it installed it."""
    if has_real_ops() or isinstance(sys.modules.get(NAME), _MissingOps):
        return False
    module = _MissingOps(NAME, "placeholder for mmcv's compiled ops (see zoo.heads._mmcv_compat)")
    module.__spec__ = importlib.machinery.ModuleSpec(NAME, None)  # loader None: "not loadable", as mmengine expects
    sys.modules[NAME] = module
    return True
