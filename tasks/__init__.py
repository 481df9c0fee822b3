"""Training and evaluation of the zoo's models on mmengine, one sub-package per task.

``tasks.common`` holds what every task shares (CPU distributed training, safe checkpoint loading, the progress
display); ``tasks.<task>`` registers that task's datasets, transforms, models and metrics in mmengine's root
registries. Configs import them with ``custom_imports = dict(imports=['tasks.<task>'], allow_failed_imports=False)``.

Importing ``tasks`` itself imports nothing heavy; the sub-packages import mmengine.
"""
