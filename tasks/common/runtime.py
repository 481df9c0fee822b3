"""Distributed training on CPU and mixed precision for mmengine's Runner.

mmengine 0.10.7 assumes a GPU in two places of its ``torchrun`` path (docs/training.md, "DDP on CPU"):
``mmengine.dist.init_dist('pytorch')`` calls ``torch.cuda.set_device`` before creating the process group, and
``Runner.wrap_model`` passes ``device_ids=[LOCAL_RANK]`` to ``DistributedDataParallel``, which DDP rejects for a
CPU module. The fix: create the gloo process group ourselves before the Runner (the Runner then skips its own
``init_dist``), and wrap the model with ``ZooDistributedDataParallel``, which drops ``device_ids`` without CUDA.
On a GPU machine both fall through to mmengine's usual NCCL path.
"""
import gc
import os
import warnings
from contextlib import contextmanager

import torch
import torch.distributed as dist
from mmengine.model import MMDistributedDataParallel
from mmengine.optim import OptimWrapper
from mmengine.registry import MODEL_WRAPPERS, OPTIM_WRAPPERS

_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def init_distributed(launcher, timeout_s=1800):
    """Create the gloo process group for ``launcher='pytorch'`` on a machine without CUDA.

    Call before ``Runner.from_cfg``. Does nothing for ``launcher='none'``, when a group exists already, or when
    CUDA is available (mmengine's ``init_dist`` then creates the NCCL group itself).

    Args:
        launcher: ``none``, ``pytorch``, ``slurm`` or ``mpi`` (as the Runner's ``launcher``).
        timeout_s: Collective timeout of the group.

    Returns:
        True if this call created the process group.
    """
    if launcher == "none" or dist.is_initialized() or torch.cuda.is_available():
        return False
    if launcher != "pytorch":
        raise RuntimeError(f"launcher {launcher!r} without CUDA is not supported here; on CPU use "
                           f"`torchrun --nproc_per_node=K tools/train.py CONFIG --launcher pytorch`.")
    missing = [k for k in _TORCHRUN_ENV if k not in os.environ]
    if missing:
        raise RuntimeError(f"--launcher pytorch needs the environment torchrun sets ({', '.join(missing)} missing); "
                           f"start with `torchrun --nproc_per_node=K tools/train.py CONFIG --launcher pytorch`.")
    from datetime import timedelta
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
    return True


@contextmanager
def distributed(launcher, timeout_s=1800):
    """``init_distributed`` for the length of a ``with`` block; the process group is destroyed when it ends.

    A gloo group left alive until interpreter exit can abort the process at teardown ("terminate called without
    an active exception", seen twice in CI on rank 0 after a finished torchrun job), so the tools close the group
    themselves when it was created inside the block (by this function on CPU, by mmengine's ``init_dist`` on
    CUDA). A group that existed before the block is the caller's and stays.

    ``destroy_process_group`` alone is not enough: each DDP wrapper's reducer holds the group too, and mmengine's
    Runner sits in reference cycles, so the wrappers (and with them the gloo group and its worker threads) lived
    on until interpreter finalisation, where tearing them down can abort. The block therefore collects garbage
    before it destroys the group; the code inside must not keep the Runner referenced past the block (build and
    run it in a function called inside it, as ``tools/train.py`` does).

    Args:
        launcher: As for ``init_distributed``.
        timeout_s: Collective timeout of the group.
    """
    existed = dist.is_available() and dist.is_initialized()
    init_distributed(launcher, timeout_s)
    try:
        yield
    finally:
        if not existed and dist.is_available() and dist.is_initialized():
            gc.collect()  # free the DDP wrappers (and their hold on the group) while the interpreter is whole
            dist.destroy_process_group()


@MODEL_WRAPPERS.register_module()
class ZooDistributedDataParallel(MMDistributedDataParallel):
    """mmengine's ``MMDistributedDataParallel`` that also wraps CPU modules.

    The Runner always passes ``device_ids=[LOCAL_RANK]``; DDP accepts device ids only for a module on one GPU, so
    they are dropped when CUDA is absent (gradients are then all-reduced over gloo). Everything else is
    mmengine's wrapper unchanged (``train_step``/``val_step``/``test_step``).

    Args:
        module: The model to wrap.
        device_ids: GPU ids (ignored without CUDA).
        **kwargs: Passed to ``torch.nn.parallel.DistributedDataParallel`` (``broadcast_buffers``,
            ``find_unused_parameters``, ...).
    """

    def __init__(self, module, device_ids=None, **kwargs):
        if not torch.cuda.is_available() or next(module.parameters()).device.type == "cpu":
            device_ids = None
            kwargs.pop("output_device", None)
        super().__init__(module=module, device_ids=device_ids, **kwargs)


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(OptimWrapper):
    """Mixed precision on CPU: the forward runs under ``torch.autocast('cpu', dtype=bfloat16)``.

    bfloat16 has float32's exponent range, so no loss scaling is needed (mmengine's ``AmpOptimWrapper`` is
    GPU-only and scales losses for float16). Weights and optimizer state stay float32.

    Args:
        dtype: ``'bfloat16'`` (the CPU autocast type).
        **kwargs: ``OptimWrapper`` arguments (``optimizer``, ``accumulative_counts``, ``clip_grad``).
    """

    def __init__(self, dtype="bfloat16", **kwargs):
        super().__init__(**kwargs)
        self.cast_dtype = getattr(torch, dtype)

    @contextmanager
    def optim_context(self, model):
        with super().optim_context(model), torch.autocast("cpu", dtype=self.cast_dtype):
            yield


_warned_no_bf16 = False


def use_amp(cfg):
    """Switch ``cfg.optim_wrapper`` to mixed precision: ``AmpOptimWrapper`` on CUDA, ``CPUAmpOptimWrapper`` on a CPU
    with native bf16 (``zoo.cpu.has_native_bf16``).

    On a CPU without native bf16 the config stays float32 and one warning says why: bf16 autocast runs emulated there
    and was measured several times slower than float32 (``zoo.cpu``). Forcing it anyway is one option away:
    ``--cfg-options optim_wrapper.type=CPUAmpOptimWrapper``.
    """
    global _warned_no_bf16
    wrapper = cfg.optim_wrapper.get("type", "OptimWrapper")
    if wrapper in ("AmpOptimWrapper", "CPUAmpOptimWrapper"):
        return cfg
    if wrapper != "OptimWrapper":
        raise ValueError(f"--amp works on optim_wrapper type OptimWrapper, but the config uses {wrapper!r}.")
    if torch.cuda.is_available():
        cfg.optim_wrapper.type = "AmpOptimWrapper"
        cfg.optim_wrapper.setdefault("loss_scale", "dynamic")
        return cfg
    from zoo import cpu
    native, reason = cpu.bf16_support()
    if native:
        cfg.optim_wrapper.type = "CPUAmpOptimWrapper"
    elif not _warned_no_bf16:
        _warned_no_bf16 = True
        warnings.warn(f"--amp: training stays float32. Reason: {reason}; bf16 autocast on such a CPU was measured "
                      f"{cpu.EMULATED_BF16_SLOWDOWN} than float32. To force bf16 anyway: --cfg-options "
                      f"optim_wrapper.type=CPUAmpOptimWrapper", stacklevel=2)
    return cfg
