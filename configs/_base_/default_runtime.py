# Runtime shared by every task's configs: hooks, environment, logging, visualisation, distributed wrapper.
# A task's configs inherit this file through their schedule base (which may override `default_hooks.checkpoint`
# and `log_processor.by_epoch` for iteration-based loops). Types below are registered by `tasks.common`, which
# tools/train.py and tools/test.py import before building the Runner.
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1, by_epoch=True, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    progress=dict(type='ProgressHook'),
    # Stops on a NaN/inf loss before CheckpointHook can save (and rotate away the last good checkpoint).
    finite_loss=dict(type='NonFiniteLossHook'),
    # Saves the random generators' states with each checkpoint; a resumed iteration-based run skips the batches it
    # trained on without reading them and goes on as if it had not stopped.
    fast_resume=dict(type='FastResumeHook'),
)

env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    # NCCL on GPUs; without CUDA, tools/train.py creates a gloo group before the Runner (tasks.common.runtime).
    dist_cfg=dict(backend='nccl'),
)

# DDP that also wraps CPU modules (drops device_ids without CUDA); used only under --launcher pytorch.
model_wrapper_cfg = dict(type='ZooDistributedDataParallel', broadcast_buffers=False, find_unused_parameters=False)

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends, name='visualizer')
log_processor = dict(window_size=50, by_epoch=True)
log_level = 'INFO'

# Same seed on every rank; the sampler seeds from it, so the data order is reproducible and resumable.
randomness = dict(seed=0, deterministic=False, diff_rank_seed=False)

load_from = None
resume = False
