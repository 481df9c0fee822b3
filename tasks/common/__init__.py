"""Runtime pieces shared by every task's training and evaluation (imported by ``tools/train.py``/``tools/test.py``).

Importing this package registers, in mmengine's root registries:

- ``ZooDistributedDataParallel`` (``MODEL_WRAPPERS``): mmengine's DDP wrapper that also works on CPU (gloo).
- ``CPUAmpOptimWrapper`` (``OPTIM_WRAPPERS``): bfloat16 autocast on CPU, what ``tools/train.py --amp`` uses there.
- ``ProgressHook`` (``HOOKS``): a progress display for training, validation and testing.
- a checkpoint loader for local files that never unpickles arbitrary objects (``tasks.common.checkpoint``).
"""
from . import checkpoint, hooks, runtime  # noqa: F401  (registration side effects)
from .checkpoint import safe_load
from .hooks import ProgressHook
from .runtime import CPUAmpOptimWrapper, ZooDistributedDataParallel, init_distributed, use_amp

__all__ = ["CPUAmpOptimWrapper", "ProgressHook", "ZooDistributedDataParallel", "init_distributed", "safe_load",
           "use_amp"]
