"""Runtime pieces shared by every task's training and evaluation (imported by ``tools/train.py``/``tools/test.py``).

Importing this package registers, in mmengine's root registries:

- ``ZooDistributedDataParallel`` (``MODEL_WRAPPERS``): mmengine's DDP wrapper that also works on CPU (gloo).
- ``CPUAmpOptimWrapper`` (``OPTIM_WRAPPERS``): bfloat16 autocast on CPU, what ``tools/train.py --amp`` uses there.
- ``ProgressHook`` (``HOOKS``): a progress display for training, validation and testing.
- ``NonFiniteLossHook`` (``HOOKS``): stops training on a NaN/inf loss before a checkpoint is saved.
- ``FirstNSampler`` (``DATA_SAMPLERS``): the first N samples in order, a fixed evaluation slice.
- a checkpoint loader for local files that never unpickles arbitrary objects (``tasks.common.checkpoint``).
"""
try:  # training and evaluation are the `train` extra: name it before an import deep inside mmengine fails
    import mmengine  # noqa: F401
except ImportError as _e:
    raise ImportError(f"training and evaluation (tools/train.py, tools/test.py) need mmengine and the other "
                      f"training packages (no module named {_e.name!r}): pip install 'zoo[train]'",
                      name=_e.name) from None

from . import checkpoint, evaluate, hooks, runtime  # noqa: F401, E402  (registration side effects)
from .checkpoint import safe_load  # noqa: E402
from .hooks import FastResumeHook, NonFiniteLossHook, ProgressHook  # noqa: E402
from .runtime import CPUAmpOptimWrapper, ZooDistributedDataParallel, distributed, init_distributed, use_amp  # noqa: E402

__all__ = ["CPUAmpOptimWrapper", "FastResumeHook", "NonFiniteLossHook", "ProgressHook", "ZooDistributedDataParallel",
           "distributed", "init_distributed", "safe_load", "use_amp"]
