"""Training hooks of the generation task."""
import os
import time

from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class TrainTimeBudgetHook(Hook):
    """Stop training after ``seconds`` of wall-clock training time and save a checkpoint there.

    Used to compare mixers under one fixed compute budget (docs/generation.md): each run trains as many iterations
    as fit, then ``tools/test.py`` scores the checkpoint written here (``iter_<n>.pth``, also recorded in
    ``last_checkpoint`` so ``--resume`` finds it).

    Args:
        seconds: The budget; ``None`` disables the hook.
    """

    priority = "LOW"

    def __init__(self, seconds=None):
        self.seconds = seconds
        self._t0 = None
        self._stopped = False

    def before_train(self, runner):
        self._t0 = time.perf_counter()

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if self.seconds is not None and time.perf_counter() - self._t0 >= self.seconds:
            runner.train_loop.stop_training = True
            self._stopped = True

    def after_train(self, runner):
        if self._stopped:
            name = f"iter_{runner.iter}.pth"
            runner.logger.info(f"time budget of {self.seconds} s spent after {runner.iter} iterations; saving {name}")
            runner.save_checkpoint(runner.work_dir, name)
            with open(os.path.join(runner.work_dir, "last_checkpoint"), "w") as f:
                f.write(os.path.join(runner.work_dir, name))
