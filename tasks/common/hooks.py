"""Hooks every task's configs use (``configs/_base_/default_runtime.py``).

``NonFiniteLossHook`` stops training on a NaN/inf loss before any checkpoint is written (see its docstring).

``FastResumeHook`` resumes an iteration-based run without reading the batches it had trained on, drawing the same
random numbers as the run that was not stopped (see its docstring).

``ProgressHook`` is a progress display for training, validation and testing (rank 0 only).

On a terminal it redraws one status line in place::

    train [##########..........] 1200/2400  50% | 812 img/s | loss 0.5321 | eta 0:01:28

Elsewhere (logs, CI) it prints the same line every ``interval_s`` seconds and at the end of each phase, so a long
run shows it is alive without flooding the log. The measured training throughput (images/s over the run, the
first ``warmup`` iterations excluded) is stored in the message hub as ``train_images_per_s`` for tools to read, with
``train_images_per_cpu_s`` (images per second of this process's CPU time, all threads): on a shared machine the
wall-clock rate depends on the other jobs, the CPU-time rate much less.
"""
import logging
import random
import sys
import time

import numpy as np
import torch
from mmengine.dataset import InfiniteSampler
from mmengine.dist import all_reduce, get_world_size, is_main_process
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop


def _batch_size(data_batch):
    """Images in a batch as collated by ``default_collate`` / ``pseudo_collate`` (a tensor or a list)."""
    if isinstance(data_batch, dict):
        inputs = data_batch.get("inputs")
        if inputs is None and data_batch:
            inputs = next(iter(data_batch.values()))
    else:
        inputs = data_batch
    if isinstance(inputs, dict):  # e.g. multi-modal inputs
        inputs = next(iter(inputs.values()))
    return len(inputs) if hasattr(inputs, "__len__") else 0


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Stop training on a non-finite loss before a checkpoint is saved.

    After each training iteration it checks every logged value whose name contains ``loss`` (mmengine's
    convention: ``loss``, ``loss_ce``, ``decode.loss_ce``, a GAN's ``loss_d``/``loss_g``). On NaN or inf it raises
    ``FloatingPointError`` (the exception the GAN's own pre-update check raises). Its priority is above
    ``CheckpointHook``'s, so the weights that this step spoiled are never written and checkpoint rotation never
    deletes the last good file; ``tools/train.py CONFIG --resume`` restarts from it. Under distributed training
    the verdict is all-reduced, so every rank stops at the same iteration instead of one rank leaving the others
    waiting in the next collective.
    """

    priority = "VERY_HIGH"

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        bad = {}
        for name, value in (outputs or {}).items():
            if "loss" in name and isinstance(value, torch.Tensor) and not torch.isfinite(value.detach()).all():
                bad[name] = value.detach().float().mean().item()
        flag = torch.tensor(float(bool(bad)))
        all_reduce(flag, op="max")
        if flag.item() == 0:
            return
        where = f"iteration {runner.iter + 1}"
        if isinstance(runner.train_loop, EpochBasedTrainLoop):
            where += f" (epoch {runner.epoch + 1}, batch {batch_idx + 1})"
        losses = ", ".join(f"{k}={v}" for k, v in bad.items()) or "on another rank"
        raise FloatingPointError(
            f"non-finite loss at {where}: {losses}. Training stopped before any checkpoint of these weights was saved; "
            f"the last checkpoint in {runner.work_dir} is intact. Check the data for NaN/inf or lower the learning "
            f"rate, then resume with tools/train.py CONFIG --resume.")


def rng_state():
    """The states of the random generators a training step draws from: torch's (and CUDA's once initialised), numpy's
    global one and Python's, as tensors and plain numbers (what the zoo's ``weights_only`` checkpoint reader takes)."""
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = dict(torch=torch.get_rng_state(),
                 numpy=dict(kind=kind, key=torch.from_numpy(key.astype(np.int64)), pos=int(pos),
                            has_gauss=int(has_gauss), gauss=float(gauss)),
                 python=dict(version=version, internal=torch.tensor(internal, dtype=torch.int64),
                             gauss_next=gauss_next))
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state):
    """Put back what ``rng_state`` returned."""
    torch.set_rng_state(state["torch"])
    n = state["numpy"]
    np.random.set_state((n["kind"], n["key"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["internal"].tolist()), p["gauss_next"]))
    if "cuda" in state:
        if torch.cuda.is_available() and torch.cuda.device_count() == len(state["cuda"]):
            torch.cuda.set_rng_state_all(state["cuda"])
        else:
            print_log(f"FastResumeHook: the checkpoint holds the generator states of {len(state['cuda'])} CUDA "
                      f"devices and this machine has {torch.cuda.device_count()}; their draws start afresh",
                      logger="current", level=logging.WARNING)


class _SkipBatches:
    """Stands in for the loop's data iterator while mmengine's advance runs: each of its first ``count`` ``next``
    calls takes one batch of indices from the sampler and reads nothing; then it hands the loop its own iterator back
    and restores the generators (``on_done``)."""

    def __init__(self, loop, count, on_done):
        self.loop, self.inner, self.count, self.on_done = loop, loop.dataloader_iterator, count, on_done

    def __iter__(self):
        return self

    def __next__(self):
        self.inner._iterator._next_index()
        self.count -= 1
        if self.count == 0:
            self.loop.dataloader_iterator = self.inner
            self.on_done()


@HOOKS.register_module()
class FastResumeHook(Hook):
    """Resume an iteration-based run in constant time, drawing exactly the random numbers of the run that was not
    stopped.

    mmengine's ``IterBasedTrainLoop`` resumes at iteration N by loading and transforming the N batches already
    trained on ("Advance dataloader N steps"), so that the augmentations after them draw what they drew before (for
    12,000 batches of 16 scenes, 5 min 45 s on one core of the 2-core EPYC beside another training), and the run
    still goes on differently from the one that was not stopped: torch's generator (dropout, drop path) starts
    again from the seed, and the validation after the checkpoint drew from it too.

    This hook writes the generators' states (``rng_state``) into every checkpoint's ``meta["rng_state"]``. On resume
    from such a checkpoint it takes the N batches' indices from the sampler without reading any image (while the
    loop's advance runs), then puts the states back and, where the run validated right after the checkpoint, makes
    the one draw that validation made (its data loader's base seed). The resumed run then repeats the uninterrupted
    one to the last bit (tests/test_resume.py). Where that cannot be promised it leaves mmengine's advance alone and
    logs why: a data loader with worker processes (they prefetch indices and hold generators of their own) or
    without mmengine's ``InfiniteSampler``, several processes, or a checkpoint written without the states.
    Epoch-based loops are left as they are: they resume at the start of an epoch and read nothing twice.

    Args:
        enabled: False leaves mmengine's resume as it is and saves no states (``default_hooks.fast_resume.enabled=
            False``; mmengine takes None only for its own default hooks).
    """

    priority = "NORMAL"

    def __init__(self, enabled=True):
        self.enabled = enabled
        self._resumed = None
        self._validating = False

    def before_val(self, runner):
        self._validating = True

    def after_val(self, runner):
        self._validating = False

    def before_save_checkpoint(self, runner, checkpoint):
        if self.enabled:  # a checkpoint saved in validation (the best one) comes after the validation's draws
            checkpoint.setdefault("meta", {})["rng_state"] = dict(rng_state(), after_validation=self._validating)

    def after_load_checkpoint(self, runner, checkpoint):
        if not self.enabled:
            return
        meta = checkpoint.get("meta") or {}
        self._resumed = (meta.get("iter"), meta.get("rng_state"))

    def _why_not(self, loop, state):
        if state is None:
            return "the checkpoint holds no generator states (written before FastResumeHook)"
        if get_world_size() > 1:
            return "several processes train"
        inner = getattr(loop.dataloader_iterator, "_iterator", None)
        if getattr(loop.dataloader, "num_workers", 0) or not hasattr(inner, "_next_index"):
            return "the data loader has worker processes"
        if not isinstance(getattr(loop.dataloader, "sampler", None), InfiniteSampler):
            return "its sampler is not an InfiniteSampler (a finite one restarts the loader each epoch)"
        return None

    def before_train_epoch(self, runner):
        loop, (at, state) = runner.train_loop, self._resumed or (None, None)
        self._resumed = None
        if not isinstance(loop, IterBasedTrainLoop):  # epoch-based loops resume at an epoch's start: nothing to skip
            return
        if not loop.iter or at != loop.iter:  # a fresh run, or weights loaded without resuming
            return
        why = self._why_not(loop, state)
        if why:
            print_log(f"FastResumeHook: the data loader reads the {loop.iter} batches trained on again, because {why}",
                      logger="current")
            return

        def restore():
            set_rng_state(state)
            getattr(loop, "_decide_current_val_interval", lambda: None)()  # the interval at this iteration
            validated = (runner.val_loop is not None and loop.iter >= loop.val_begin
                         and (loop.iter % loop.val_interval == 0 or loop.iter == loop.max_iters))
            if validated and not state.get("after_validation"):
                iter(runner.val_loop.dataloader)  # validation drew its loader's base seed after the checkpoint

        loop.dataloader_iterator = _SkipBatches(loop, loop.iter, restore)
        print_log(f"FastResumeHook: skipping the sampler past {loop.iter} batches without reading them; the random "
                  f"generators resume from the checkpoint", logger="current")


def _fmt_eta(seconds):
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


@HOOKS.register_module()
class ProgressHook(Hook):
    """Show progress of training, validation and testing.

    Args:
        interval_s: Seconds between printed lines when the output is not a terminal.
        width: Characters of the bar.
        warmup: Training iterations left out of the throughput (first iterations pay for start-up).
        stream: Where to write (default ``sys.stderr``).
    """

    priority = "VERY_LOW"

    def __init__(self, interval_s=30.0, width=20, warmup=5, stream=None):
        self.interval_s = interval_s
        self.width = width
        self.warmup = warmup
        self.stream = stream
        self._phase = None

    # -- drawing ----------------------------------------------------------------------------------------------
    @property
    def _out(self):
        return self.stream or sys.stderr

    def _start(self, phase, total):
        self._phase, self._total, self._done, self._images, self._first = phase, total, 0, 0, 0
        self._t0 = self._last_print = time.perf_counter()
        self._tty = hasattr(self._out, "isatty") and self._out.isatty()

    def _line(self, extra=""):
        frac = self._done / self._total if self._total else 0.0
        filled = int(round(frac * self.width))
        elapsed = time.perf_counter() - self._t0
        done_here = self._done - self._first  # a resumed run starts part-way
        eta = elapsed / done_here * (self._total - self._done) if done_here > 0 else 0.0
        rate = self._images / elapsed if elapsed > 0 else 0.0
        return (f"{self._phase} [{'#' * filled}{'.' * (self.width - filled)}] {self._done}/{self._total} "
                f"{100 * frac:3.0f}% | {rate:.0f} img/s{extra} | eta {_fmt_eta(eta)}")

    def _show(self, extra="", final=False):
        if not is_main_process():
            return
        now = time.perf_counter()
        if self._tty:
            self._out.write("\r" + self._line(extra) + ("\n" if final else ""))
            self._out.flush()
        elif final or now - self._last_print >= self.interval_s:
            self._out.write(self._line(extra) + "\n")
            self._out.flush()
            self._last_print = now

    # -- training -------------------------------------------------------------------------------------------------
    def before_train(self, runner):
        self._start("train", runner.max_iters)
        self._done = self._first = self._start_iter = runner.iter  # resumed runs start part-way
        self._rate_t0, self._rate_images, self._paused, self._cpu_paused = None, 0, 0.0, 0.0
        if self.warmup <= 0:
            self._rate_t0, self._cpu_t0 = time.perf_counter(), time.process_time()

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        n = _batch_size(data_batch)
        self._done = runner.iter + 1
        self._images += n
        if runner.iter + 1 - self._start_iter == self.warmup:
            self._rate_t0, self._rate_images, self._paused = time.perf_counter(), 0, 0.0
            self._cpu_t0, self._cpu_paused = time.process_time(), 0.0
        elif self._rate_t0 is not None:
            self._rate_images += n
            rate = self._rate_images / max(time.perf_counter() - self._rate_t0 - self._paused, 1e-9)
            cpu_rate = self._rate_images / max(time.process_time() - self._cpu_t0 - self._cpu_paused, 1e-9)
            runner.message_hub.update_info("train_images_per_s", rate)
            runner.message_hub.update_info("train_images_per_cpu_s", cpu_rate)
        loss = (outputs or {}).get("loss")
        if loss is not None and hasattr(loss, "detach"):
            loss = loss.detach()
        extra = f" | loss {float(loss):.4f}" if loss is not None else ""
        self._show(extra, final=self._done == self._total)

    # -- evaluation ------------------------------------------------------------------------------------------------
    def _eval_start(self, runner, phase, loop):
        self._saved = (self._phase, getattr(self, "_total", 0), getattr(self, "_done", 0),
                       getattr(self, "_images", 0), getattr(self, "_t0", 0.0), getattr(self, "_first", 0))
        self._eval_t0, self._eval_cpu_t0 = time.perf_counter(), time.process_time()
        self._start(phase, len(loop.dataloader))

    def _eval_end(self):
        self._show(final=True)
        phase, self._total, self._done, self._images, t0, self._first = self._saved
        spent = time.perf_counter() - self._eval_t0
        self._paused = getattr(self, "_paused", 0.0) + spent  # validation time is left out of the throughput
        self._cpu_paused = getattr(self, "_cpu_paused", 0.0) + time.process_time() - self._eval_cpu_t0
        self._t0 = t0 + spent  # the training rate/eta exclude the evaluation time
        self._phase = phase

    def before_val_epoch(self, runner):
        self._eval_start(runner, "val", runner.val_loop)

    def _eval_iter(self, batch_idx, data_batch):
        self._done = batch_idx + 1
        self._images += _batch_size(data_batch)
        self._show()

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self._eval_iter(batch_idx, data_batch)

    def after_val_epoch(self, runner, metrics=None):
        self._eval_end()

    def before_test_epoch(self, runner):
        self._eval_start(runner, "test", runner.test_loop)

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self._eval_iter(batch_idx, data_batch)

    def after_test_epoch(self, runner, metrics=None):
        self._eval_end()
