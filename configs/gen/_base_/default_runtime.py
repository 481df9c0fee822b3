# Runtime of the generation configs: the shared runtime, iteration-based checkpoints and logs.
_base_ = ['../../_base_/default_runtime.py']
custom_imports = dict(imports=['tasks.gen'], allow_failed_imports=False)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),  # validations logged at their iteration
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=5000, max_keep_ckpts=3),
)
log_processor = dict(by_epoch=False, window_size=50)
# Under --launcher pytorch, G and D are wrapped separately (the model calls them directly in train_step); this
# wrapper is mmengine's MMSeparateDistributedDataParallel made to work on CPU too (tasks.gen.model).
model_wrapper_cfg = dict(type='GANSeparateDistributedDataParallel', broadcast_buffers=False,
                         find_unused_parameters=False)
