"""Training hooks of the generation task."""
import os
import time

from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class TrainTimeBudgetHook(Hook):
    """Stop training after a budget of ``seconds`` of training time and save a checkpoint there.

    Used to compare mixers under one fixed compute budget (docs/generation.md): each run trains as many iterations
    as fit, then ``tools/test.py`` scores the checkpoint written here (``iter_<n>.pth``, also recorded in
    ``last_checkpoint`` so ``--resume`` finds it).

    Args:
        seconds: The budget; ``None`` disables the hook.
        clock: ``cpu`` counts this process's CPU time (``time.process_time``, all threads): on a shared machine
            it measures the work done, not how busy the neighbours were; ``wall`` counts elapsed time.
    """

    priority = "LOW"

    def __init__(self, seconds=None, clock="cpu"):
        if clock not in ("cpu", "wall"):
            raise ValueError(f"TrainTimeBudgetHook: clock must be 'cpu' or 'wall', got {clock!r}")
        self.seconds = seconds
        self._clock = time.process_time if clock == "cpu" else time.perf_counter
        self.clock = clock
        self._t0 = None
        self._stopped = False

    def before_train(self, runner):
        self._t0 = self._clock()

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if self.seconds is not None and self._clock() - self._t0 >= self.seconds:
            runner.train_loop.stop_training = True
            self._stopped = True

    def after_train(self, runner):
        if self._stopped:
            name = f"iter_{runner.iter}.pth"
            runner.logger.info(f"{self.clock} time budget of {self.seconds} s spent after {runner.iter} iterations; "
                               f"saving {name}")
            runner.save_checkpoint(runner.work_dir, name)
            with open(os.path.join(runner.work_dir, "last_checkpoint"), "w") as f:
                f.write(os.path.join(runner.work_dir, name))
