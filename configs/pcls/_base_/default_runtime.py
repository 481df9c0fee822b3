# Runtime of the point-cloud configs: the shared runtime plus the task code (datasets, transforms, models, metrics
# registered in mmengine's root registries by tasks.points). Epoch-based loops.
_base_ = ['../../_base_/default_runtime.py']
custom_imports = dict(imports=['tasks.points'], allow_failed_imports=False)
default_hooks = dict(logger=dict(type='LoggerHook', interval=20))
