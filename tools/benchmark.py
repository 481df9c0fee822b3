"""Speed and memory of the token mixers and classifiers (a benchmark, not a test).

    python tools/benchmark.py                                    # mixers + *_vit_small classifiers
    python tools/benchmark.py --timm-python /work/timm-venv/bin/python --fast   # + timm comparison, bf16 path
    python tools/benchmark.py --tasks                            # + every tasks/<task>/bench.py:run(quick)
    python tools/benchmark.py --quick                            # a short smoke run
    python tools/benchmark.py --only seg                         # segmentation end to end (slow: ~30 min, 2 cores)
    python tools/benchmark.py --only seg-heads                   # neck + decode head alone at 1024 px

Timings use ``torch.utils.benchmark.Timer`` (``blocked_autorange``: medians of blocks of calls; one timed call
when a single call is slower than ``--min-run-time``), except the rounds that interleave several models or token
counts so that load on a shared machine hits them alike. The machine line (CPU model, AVX2 / AVX-512 / bf16 flags,
torch) is printed and stored with the results.

What is measured (all forward passes in ``torch.inference_mode``, float32 unless stated, on CPU):

- **mixers**: each mixer alone on one sequence of N = 256, 1024, 4096, 16384 tokens of width C = 384 with 6 heads
  (``ff`` is built for each N, since N shapes its weights). Time is the median of several forwards after a warm-up.
  Peak memory is the growth of the process's peak resident set (Linux ``VmHWM``, reset through
  ``/proc/self/clear_refs``) during one forward, measured in a separate worker process whose glibc allocator
  returns every block over 64 KiB to the system (``mallopt``), so the number is the activation and workspace memory
  of that forward (weights and input excluded), not allocator caching.
- **classifiers**: images/s of each ``*_vit_small`` at 224x224, batch 8, and ``sa_vit_base`` for the comparison.
- **timm** (``--timm-python``): timm's ``vit_small_patch16_224`` / ``vit_base_patch16_224`` (random weights, same
  input tensor, same thread count) timed in a worker process of that interpreter, interleaved round by round with
  the zoo models so that load on a shared machine hits both alike. The worker also times the zoo models under the
  worker's torch, so the comparison is shown both across and within one torch build.
- **fast path** (``--fast``): the zoo classifiers under ``torch.autocast("cpu", dtype=torch.bfloat16)`` (bf16
  matmuls; LayerNorm / softmax stay float32) and with int8 linears (``zoo.cpu.int8_dynamic``); ``--compile`` also
  times ``torch.compile`` (Inductor with freezing, or ``--compile max-autotune``). bf16 only on a CPU with native
  bf16 (``zoo.cpu.bf16_support``: AVX512-BF16 or AMX); elsewhere the bf16 rows are skipped with the reason printed
  (emulated bf16 is several times slower than float32; ``--emulated-bf16`` times them anyway, to measure that
  cost). The row of ``zoo.cpu.fast_path()`` (bf16 where native, int8 elsewhere) is judged against 1.2x timm eager.
- **int8 top-1** (``--only int8-top1``): what the int8 linears cost in accuracy: each bundled Fashion-MNIST
  classifier's top-1 on the 10,000 t10k images in float32 and int8, and how often the two agree.
- **seg end to end** (``--only seg``): for each mixer, the ``*_vit_tiny`` segmentor (``zoo.load(task="seg")``, 150
  classes, 512 crop) with UPerNet and with the light head (``decode_head="segformer"``) on one image at 512, 1024
  and 2048 pixels (1k, 4k, 16k tokens): inference (image -> label map with ``predict`` as the seg configs evaluate,
  ``test_cfg.return_logits=False``: labels straight from the head's logits; no grad; ``ff`` slides its 512 window)
  and one training step
  (forward + backward + AdamW step, batch ``--seg-train-batch`` = 2, the configs' images per GPU; UPerNet's
  pooling BN needs more than one image; ``ff`` trains at its crop only; ``--seg-modes`` adds ``train-mmseg``, the
  step with mmseg's head losses on full-resolution logits instead of ``zoo.heads.seg_loss``, and ``train-cp``,
  the step with gradient checkpointing of the trunk blocks, ``set_grad_checkpointing``). Each (head, size, mixer,
  mode) runs in a fresh process; its peak memory is the growth of the peak RSS during the first call
  (``zoo.cpu.PeakMemory``), and the time is measured after that call. Rows whose time or memory, extrapolated
  from the smaller sizes of the same row, exceed ``--seg-max-seconds`` or the available memory are skipped with the
  estimate printed.
- **linear** (``--only linear``): the classifiers with oneDNN's fused linear (``zoo.layers.linear``, the CPU
  inference fast path) and with it switched off (``F.linear``), interleaved round by round in one process.
- **gemm** (``--only gemm``): a classifier's forward (default ``sa_vit_base``) against its own GEMMs timed alone
  at their exact shapes through the same linear, interleaved round by round: the share of the GEMM rate the whole
  forward reaches.
- **seg resize** (``--only seg-resize``): the light head's image -> label map at ``--seg-heads-res`` three ways,
  interleaved in one process: mmseg's (150-class logits resized in NCHW layout, then the argmax), ``predict`` with
  the resize in channels-last layout, and ``predict`` without the full-size logits (``zoo.layers.resize_argmax``),
  with the number of pixels whose label differs from mmseg's.
- **mlp chunk** (``--only mlp-chunk``): the light head's image -> label map at each ``--seg-sizes`` with the
  channel MLP run over blocks of rows (``zoo.layers.mlp.CHUNK_ROWS``, CPU inference) and in one shot, interleaved
  in one process, with the number of pixels whose label differs.
- **mlp gelu** (``--only mlp-gelu``): the same, with the MLP's GELU written over fc1's output at inference
  (``zoo.layers.mlp.INPLACE_GELU``) and into a second hidden tensor.
- **ea chunk** (``--only ea-chunk``): the same for ``ea``'s token blocks at inference, ``chunk_tokens`` as it is
  against 512 tokens a block.
- **seg rounds** (``--only seg-rounds``): the light head's image -> label map of every mixer in one process, the
  mixers interleaved round by round: medians and the ratio to ``sa`` (steadier than ``--only seg``'s one timed call
  per fresh process on a shared machine), next to each model's GFLOP (counted on the meta device) and ``sa``'s
  GFLOP over the mixer's: the ratio the times would have if every product ran at the same rate.
- **head paths** (``--only head-paths``): the same, with the light head's inference paths (the trunk's maps as
  channels-last views, the fusion conv before the resize: ``zoo.heads.light_head``) against mmseg's
  (``SegformerHead.forward`` on contiguous NCHW maps).
- **seg heads** (``--only seg-heads``): neck + decode head alone on four random ``*_vit_tiny`` maps of a 1024-pixel
  image, for UPerNet and the light-head candidates (how the light head was chosen).
- **tasks** (``--tasks``): rows returned by ``tasks/<task>/bench.py:run(quick)`` for every task that has one.

Targets checked at the end (ratios measured in this one run): ``ea`` and ``effa`` time(16384) / time(1024) <= 18
(linear cost: ideal 16); ``sa_vit_small`` / ``sa_vit_base`` at least as fast as timm eager; the fast path faster
than timm eager. Results go to ``OUT/benchmark.json`` and the plot to ``OUT/benchmark.png`` (needs matplotlib).
"""
import argparse
import ctypes
import gc
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import torch  # noqa: E402
from zoo.datasets import FASHION_MNIST_ROOT  # noqa: E402

TOKENS = (256, 1024, 4096, 16384)
TIMM_NAMES = {"sa_vit_small": "vit_small_patch16_224", "sa_vit_base": "vit_base_patch16_224"}
# Issue 13's goal for a documented faster path than float32 eager, against timm eager; the row that is this CPU's fast
# path (zoo.cpu.fast_path: bf16 autocast where bf16 is native, int8 linears elsewhere).
FAST_PATH_GOAL = 1.2
FAST_PATH = {"bf16": "zoo bf16 autocast", "int8": "zoo int8 dynamic"}


# -- timing ---------------------------------------------------------------------------------------------------------
def per_round_ratio(num, den):
    """The median over rounds of ``num[i] / den[i]`` (two timings taken in the same interleaved rounds): a ratio that
    a change of load between rounds hits alike, next to the ratio of the medians."""
    return statistics.median(a / b for a, b in zip(num, den))


def timer_median(fn, min_run_time=1.0, first_s=None):
    """Median seconds per call of ``fn()`` and the per-call times, by ``torch.utils.benchmark.Timer``.

    ``blocked_autorange(min_run_time)``: blocks of calls until ``min_run_time`` is spent (its block-size estimate
    is a warm-up). When the caller already made a warm-up call that took ``first_s >= min_run_time``, one more
    timed call is the measurement (``timeit(1)``), so a minute-long training step is not run three times.
    """
    from torch.utils import benchmark
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    m = timer.timeit(1) if first_s is not None and first_s >= min_run_time else \
        timer.blocked_autorange(min_run_time=min_run_time)
    return m.median, list(m.times)


def bf16_skip_reason():
    """None on a CPU with native bf16, else why the bf16 rows are skipped (``zoo.cpu.bf16_support``)."""
    from zoo import cpu
    native, reason = cpu.bf16_support()
    return None if native else f"bf16 rows skipped: {reason}; emulated bf16 was measured {cpu.EMULATED_BF16_SLOWDOWN}"


def mem_available_bytes():
    """``MemAvailable`` from /proc/meminfo (None where unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def ff_weight_bytes(n, ratio=4):
    return 4 * (2 * n * ratio * n + n * ratio + n + 2 * n)  # fc1 + fc2 weights and biases, LayerNorm, float32


def build_mixer(name, dim, heads, n):
    from zoo import mixers
    torch.manual_seed(0)
    return mixers.build(name, dim=dim, num_heads=heads, num_tokens=n if name == "ff" else None).eval()


def skip_reason(name, n, ff_max_tokens):
    if name != "ff":
        return None
    if ff_max_tokens and n > ff_max_tokens:
        return f"skipped (--ff-max-tokens {ff_max_tokens})"
    need, avail = ff_weight_bytes(n), mem_available_bytes()
    if avail is not None and need * 1.3 + 2 ** 30 > avail:
        return f"skipped: ff weights need {need / 2 ** 30:.1f} GiB, {avail / 2 ** 30:.1f} GiB available"
    return None


# -- peak memory worker (separate process) --------------------------------------------------------------------------
def _status_mb():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmHWM:", "VmRSS:")):
                key, val = line.split(":")
                out[key] = int(val.split()[0]) / 1024
    return out


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def memory_worker(jobs):
    """Measure peak RSS growth of one forward for each job; prints one JSON line per job."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD: every block > 64 KiB is mmapped, and unmapped when freed
    libc.mallopt(-1, 0)  # M_TRIM_THRESHOLD: return freed heap tops at once
    import zoo
    for job in jobs:
        if job["kind"] == "mixer":
            model = build_mixer(job["name"], job["dim"], job["heads"], job["n"])
            x = torch.randn(1, job["n"], job["dim"])
        else:
            torch.manual_seed(0)
            model = zoo.load(job["name"], img_size=job["img_size"]).eval()
            x = torch.randn(job["batch"], 3, job["img_size"], job["img_size"])
        with torch.inference_mode():
            model(x)  # warm-up: one-time kernel and thread-pool setup is not part of the forward's memory
            gc.collect()
            before = _status_mb()["VmRSS"]
            _reset_peak()
            y = model(x)
            peak = _status_mb()["VmHWM"]
        del y, model, x
        gc.collect()
        print(json.dumps(dict(job, peak_mb=round(peak - before, 1))), flush=True)


def run_memory_jobs(jobs, threads):
    if not jobs:
        return {}
    if not os.path.exists("/proc/self/clear_refs"):
        print("peak memory: /proc/self/clear_refs is unavailable here; memory columns are left empty")
        return {}
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, os.path.abspath(__file__), "--_memory-worker", json.dumps(jobs), "--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            out[(d["kind"], d["name"], d.get("n"))] = d["peak_mb"]
    if r.returncode != 0:
        print(f"peak memory worker failed (rc {r.returncode}); partial results kept:\n{r.stderr[-2000:]}")
    return out


# -- timm worker (separate interpreter) -----------------------------------------------------------------------------
TIMM_WORKER = r'''
import json, statistics, sys, time
import torch
repo, inputs, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
sys.path.insert(0, repo)
x = torch.load(inputs, weights_only=True)
models = {}
def get(impl, name):
    key = (impl, name)
    if key not in models:
        torch.manual_seed(0)
        if impl == "timm":
            import timm
            models[key] = timm.create_model(name, pretrained=False).eval()
        else:
            import zoo
            models[key] = zoo.load(name).eval()
        with torch.inference_mode():
            models[key](x)  # warm-up
    return models[key]
import timm, zoo
print(json.dumps(dict(ready=True, torch=torch.__version__, timm=timm.__version__, threads=torch.get_num_threads())),
      flush=True)
for line in sys.stdin:
    job = json.loads(line)
    m = get(job["impl"], job["name"])
    times = []
    with torch.inference_mode():
        for _ in range(job.get("runs", 1)):
            t = time.perf_counter(); m(x); times.append(time.perf_counter() - t)
    print(json.dumps(dict(times=times)), flush=True)
'''


class TimmWorker:
    """A persistent process of the timm interpreter answering one timing job per line."""

    def __init__(self, python, inputs_path, threads):
        self.tmp = tempfile.NamedTemporaryFile("w", suffix="_timm_worker.py", delete=False)
        self.tmp.write(TIMM_WORKER)
        self.tmp.close()
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen([python, self.tmp.name, REPO, inputs_path, str(threads)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the timm worker ({python}) did not start; run it by hand to see why")
        self.info = json.loads(line)

    def time(self, impl, name, runs=1):
        self.proc.stdin.write(json.dumps(dict(impl=impl, name=name, runs=runs)) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the timm worker died while timing {impl}:{name}")
        return json.loads(line)["times"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        os.unlink(self.tmp.name)


# -- sections -------------------------------------------------------------------------------------------------------
def bench_mixers(args):
    """Forward time of each mixer at each N. Mixers whose weights do not depend on N are timed round-robin over N
    (one forward per N per round, after a warm-up), so load changes on a shared machine hit every N alike and the
    ratios between token counts are measured together; ``ff`` (one model per N, up to GBs of weights) runs N by N."""
    from zoo import mixers
    rows = []
    for name in mixers.MIXERS:
        todo = {}
        for n in args.tokens:
            row = dict(mixer=name, tokens=n, dim=args.dim, heads=args.heads)
            rows.append(row)
            reason = skip_reason(name, n, args.ff_max_tokens)
            if reason:
                row["note"] = reason
                print(f"  {name:5s} N={n:6d}  {reason}", flush=True)
            else:
                todo[n] = row
        if name != "ff":
            m = build_mixer(name, args.dim, args.heads, None)
            xs = {n: torch.randn(1, n, args.dim) for n in todo}
            times = {n: [] for n in todo}
            with torch.inference_mode():
                for n in todo:
                    m(xs[n])  # warm-up
                for _ in range(args.repeats):
                    for n in todo:
                        t = time.perf_counter()
                        m(xs[n])
                        times[n].append(time.perf_counter() - t)
            for n, row in todo.items():
                row.update(ms=statistics.median(times[n]) * 1e3, runs=len(times[n]), times=times[n])
        else:
            for n, row in todo.items():
                m = build_mixer(name, args.dim, args.heads, n)
                x = torch.randn(1, n, args.dim)
                with torch.inference_mode():
                    m(x)  # warm-up
                    med, times = timer_median(lambda: m(x), args.min_run_time)
                row.update(ms=med * 1e3, runs=len(times), times=times)
                del m, x
                gc.collect()
        for n, row in todo.items():
            print(f"  {name:5s} N={n:6d}  {row['ms']:10.2f} ms  ({row['runs']} runs)", flush=True)
    if not args.no_memory:
        jobs = [dict(kind="mixer", name=r["mixer"], n=r["tokens"], dim=args.dim, heads=args.heads)
                for r in rows if "ms" in r]
        peaks = run_memory_jobs(jobs, args.threads)
        for r in rows:
            if ("mixer", r["mixer"], r["tokens"]) in peaks:
                r["peak_mb"] = peaks[("mixer", r["mixer"], r["tokens"])]
    return rows


def saved_for_backward_mb(fn, exclude=()):
    """MB that autograd keeps for the backward pass of ``fn()``: the distinct storages its saved-tensor hooks see,
    less those of ``exclude`` (the input, the weights: they exist anyway)."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return out, sum(seen.values()) / 2 ** 20


def bench_mixers_train(args):
    """One training step of each mixer alone (forward + backward, ``--train-batch`` sequences, the ``mixers``
    section's C and heads) at each N of ``--train-tokens``, mixers interleaved round by round; and the MB autograd
    keeps for the backward pass (what a trunk of such blocks holds per block while it trains)."""
    from zoo import mixers
    rows = []
    for n in args.train_tokens:
        x = torch.randn(args.train_batch, n, args.dim, requires_grad=True)
        grad = torch.randn(args.train_batch, n, args.dim)
        todo = {}
        for name in mixers.MIXERS:
            reason = skip_reason(name, n, args.ff_max_tokens)
            row = dict(mixer=name, tokens=n, batch=args.train_batch, dim=args.dim, heads=args.heads)
            rows.append(row)
            if reason:
                row["note"] = reason
                continue
            m = build_mixer(name, args.dim, args.heads, n).train()
            out, row["saved_mb"] = saved_for_backward_mb(lambda: m(x), exclude=[x, *m.parameters()])
            out.backward(grad)  # warm-up
            todo[name] = (m, row, [])
        for _ in range(args.repeats):
            for m, _, times in todo.values():
                t = time.perf_counter()
                m(x).backward(grad)
                times.append(time.perf_counter() - t)
        for name, (m, row, times) in todo.items():
            row.update(ms=statistics.median(times) * 1e3, runs=len(times))
            print(f"  {name:5s} N={n:6d}  {row['ms']:10.2f} ms  {row['saved_mb']:10.3f} MB saved", flush=True)
        sa_ms = todo["sa"][1]["ms"] if "sa" in todo else None
        for m, row, _ in todo.values():
            if sa_ms:
                row["x_sa"] = round(sa_ms / row["ms"], 2)
            row["ms"], row["saved_mb"] = round(row["ms"], 2), round(row["saved_mb"], 3)
    return rows


def _autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def bench_models(args, timm_python=None):
    """Classifier throughput, interleaved round by round with the timm worker when there is one."""
    import zoo
    from zoo import cpu
    bf16 = args.fast
    skip = bf16_skip_reason() if args.fast else None
    if skip and args.emulated_bf16:
        print(f"  bf16 rows timed as asked (--emulated-bf16), emulated: {cpu.bf16_support()[1]}", flush=True)
    elif skip:
        print(f"  {skip} (--emulated-bf16 times them anyway)", flush=True)
        bf16 = False
    names = [n for n in zoo.list_models() if n.endswith("_vit_small")]
    if "sa_vit_base" not in names:
        names.append("sa_vit_base")
    if args.models:
        names = args.models
    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.img_size, args.img_size)
    variants = {}  # label -> callable
    for name in names:
        torch.manual_seed(0)
        m = zoo.load(name, img_size=args.img_size).eval()
        variants[(name, "zoo fp32")] = (lambda m=m: m(x))
        if bf16:
            variants[(name, "zoo bf16 autocast")] = (lambda m=m: _bf16_call(m, x))
        if args.fast:
            q = cpu.int8_dynamic(m)
            variants[(name, "zoo int8 dynamic")] = (lambda q=q: q(x))
        if args.compile:
            cm = compiled(m, args.compile)
            variants[(name, "zoo fp32 compile")] = (lambda cm=cm: cm(x))
            if bf16:
                variants[(name, "zoo bf16 compile")] = (lambda cm=cm: _bf16_call(cm, x))
    worker, remote = None, []
    if timm_python:
        if not os.path.exists(timm_python):
            print(f"timm comparison skipped: {timm_python} does not exist (build it: python3 -m venv /work/timm-venv "
                  f"&& /work/timm-venv/bin/pip install torch==2.14.1 torchvision==0.29.1 timm)")
        elif args.img_size != 224:
            print("timm comparison skipped: timm's *_patch16_224 models are compared at --img-size 224 only")
        else:
            inputs = os.path.join(tempfile.mkdtemp(), "inputs.pt")
            torch.save(x, inputs)
            worker = TimmWorker(timm_python, inputs, args.threads)
            print(f"  timm worker: torch {worker.info['torch']}, timm {worker.info['timm']}, "
                  f"{worker.info['threads']} threads", flush=True)
            for name, timm_name in TIMM_NAMES.items():
                if name in names:
                    remote += [((name, "timm eager"), ("timm", timm_name)),
                               ((name, f"zoo fp32 @ torch {worker.info['torch']}"), ("zoo", name))]
    times = {k: [] for k in list(variants) + [r[0] for r in remote]}
    with torch.inference_mode():
        for fn in variants.values():  # warm-up (compiles, if asked)
            fn()
        for _, (impl, name) in remote:
            worker.time(impl, name, runs=1)
        for rnd in range(args.repeats):
            for key, fn in variants.items():
                t = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - t)
            for key, (impl, name) in remote:
                times[key] += worker.time(impl, name, runs=1)
            print(f"  round {rnd + 1}/{args.repeats} done", flush=True)
    if worker:
        worker.close()
    rows = []
    for (name, impl), ts in times.items():
        med = statistics.median(ts)
        rows.append(dict(model=name, impl=impl, batch=args.batch, img_size=args.img_size, ms=med * 1e3,
                         images_per_s=args.batch / med, runs=len(ts)))
    if not args.no_memory:
        jobs = [dict(kind="model", name=n, batch=args.batch, img_size=args.img_size) for n in names]
        peaks = run_memory_jobs(jobs, args.threads)
        for r in rows:
            if r["impl"] == "zoo fp32" and ("model", r["model"], None) in peaks:
                r["peak_mb"] = peaks[("model", r["model"], None)]
    return rows


def compiled(model, how):
    """``torch.compile`` for CPU inference: Inductor with ``freezing`` (parameters become constants, so the GEMMs get
    oneDNN's prepacked weights and the elementwise work around them is fused), and with ``how == "max-autotune"``
    also Inductor's GEMM autotuning over its C++ templates and ATen."""
    options = {"freezing": True}
    if how == "max-autotune":
        options.update(max_autotune=True, max_autotune_gemm_backends="CPP,ATEN")
    return torch.compile(model, options=options)


def int8_top1(tag, images, labels, batch=500):
    """Top-1 (%) of the bundled classifier ``tag`` on ``images`` (N, H, W) uint8 in float32 and with int8 linears
    (``zoo.cpu.int8_dynamic``), and the share of images (%) on which the two predict the same class."""
    import zoo
    from zoo import cpu
    model = zoo.load(tag).eval()
    cfg = model.pretrained_cfg
    q = cpu.int8_dynamic(model)
    preds = {"fp32": [], "int8": []}
    with torch.inference_mode():
        for i in range(0, len(images), batch):
            x = zoo.preprocess(images[i:i + batch], model)  # (N, 28, 28) uint8 -> normalised (N, 1, 28, 28)
            preds["fp32"].append(model(x).argmax(1))
            preds["int8"].append(q(x).argmax(1))
    fp32, int8 = torch.cat(preds["fp32"]), torch.cat(preds["int8"])
    y = torch.as_tensor(labels).long()
    pct = lambda t: round(100.0 * float(t.float().mean()), 2)  # noqa: E731
    return dict(tag=tag, images=len(y), top1_fp32=pct(fp32 == y), top1_int8=pct(int8 == y),
                card_top1=cfg["metrics"].get("top1"), same_class=pct(fp32 == int8))


def bench_int8_top1(args):
    """What int8 linears cost in accuracy: the bundled Fashion-MNIST classifiers on the t10k images, float32 against
    ``zoo.cpu.int8_dynamic`` (``int8_top1``)."""
    import zoo
    from zoo.datasets import read_fashion_mnist
    images, labels = read_fashion_mnist(args.fmnist_root, "test")
    rows = []
    for tag in sorted(t for t in zoo.list_pretrained() if t.endswith(".cls_fmnist")):
        rows.append(int8_top1(tag, images, labels))
        r = rows[-1]
        print(f"  {tag}: top-1 {r['top1_fp32']} fp32, {r['top1_int8']} int8, same class {r['same_class']}%",
              flush=True)
    return rows


def _bf16_call(m, x):
    with _autocast():
        return m(x)


def bench_linear(args):
    """oneDNN's fused linear (``zoo.layers.linear``) against ``F.linear`` in one process: the classifiers' forward
    with the fast path on and off (``_ONEDNN_LINEAR`` set to the op or None), interleaved round by round, whatever
    this CPU's default is (printed)."""
    import zoo
    import zoo.layers.linear as L
    default = L._ONEDNN_LINEAR
    fused = L.ONEDNN_OP
    if fused is None:
        print("  linear: this torch has no oneDNN linear; nothing to compare")
        return []
    on, why = L.default_enabled()
    print(f"  default here: {'oneDNN linear' if on else 'F.linear'} ({why})", flush=True)
    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.img_size, args.img_size)
    rows = []
    for name in args.models or ("sa_vit_small", "sa_vit_base", "ea_vit_small", "effa_vit_small"):
        torch.manual_seed(0)
        m = zoo.load(name, img_size=args.img_size).eval()
        times = {"oneDNN linear": [], "F.linear": []}
        try:
            with torch.inference_mode():
                for impl in times:  # warm-up
                    L._ONEDNN_LINEAR = fused if impl == "oneDNN linear" else None
                    m(x)
                for _ in range(args.repeats):
                    for impl in times:
                        L._ONEDNN_LINEAR = fused if impl == "oneDNN linear" else None
                        t = time.perf_counter()
                        m(x)
                        times[impl].append(time.perf_counter() - t)
        finally:
            L._ONEDNN_LINEAR = default
        a, b = times["oneDNN linear"], times["F.linear"]
        row = dict(model=name, batch=args.batch, img_size=args.img_size, onednn_ms=statistics.median(a) * 1e3,
                   f_linear_ms=statistics.median(b) * 1e3, runs=len(a))
        row["F.linear / oneDNN"] = row["f_linear_ms"] / row["onednn_ms"]
        row["per-round ratio (median)"] = per_round_ratio(b, a)
        rows.append(row)
        print(f"  {name:16s} oneDNN {row['onednn_ms']:8.1f} ms  F.linear {row['f_linear_ms']:8.1f} ms  "
              f"ratio {row['F.linear / oneDNN']:.3f}", flush=True)
    return rows


# -- GEMM share ------------------------------------------------------------------------------------------------------
def _trial_forward(model, x, handles):
    """One inference forward of ``model`` on ``x`` for the recording ``handles``' hooks, which are removed after it."""
    try:
        with torch.inference_mode():
            model(x)
    finally:
        for h in handles:
            h.remove()


def gemm_shapes(model, x):
    """``{(M, K, N, bias): count}`` of the matrix products of one forward of ``model`` on ``x``: every
    ``nn.Linear`` call (recorded by forward hooks on a copy-free trial run; the hooks are removed before timing, as
    they switch off the fused path) and a stride-equals-kernel patch-embedding conv, which is a GEMM of its patches."""
    shapes, handles = {}, []

    def record(mod, inp, out):
        k, n = mod.in_features, mod.out_features
        key = (inp[0].numel() // k, k, n, mod.bias is not None)
        shapes[key] = shapes.get(key, 0) + 1

    def record_conv(mod, inp, out):
        k = mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1]
        key = (out.shape[0] * out.shape[2] * out.shape[3], k, mod.out_channels, mod.bias is not None)
        shapes[key] = shapes.get(key, 0) + 1

    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear):
            handles.append(mod.register_forward_hook(record))
        elif isinstance(mod, torch.nn.Conv2d) and mod.kernel_size == mod.stride and mod.groups == 1:
            handles.append(mod.register_forward_hook(record_conv))
    _trial_forward(model, x, handles)
    return shapes


def attention_products(model, x):
    """``{(B * h, N, d): count}`` of the softmax attentions of one forward of ``model`` on ``x``: each is two batched
    matrix products that ``scaled_dot_product_attention`` computes inside one kernel, Q K^T ((N, d) x (d, N)) and
    P V ((N, N) x (N, d)) for each of B * h heads (recorded by forward pre-hooks on the ``sa`` mixers, removed
    before timing)."""
    from zoo.mixers.sa import SelfAttention
    shapes, handles = {}, []

    def record(mod, inp):
        b, n, c = inp[0].shape
        key = (b * mod.num_heads, n, c // mod.num_heads)
        shapes[key] = shapes.get(key, 0) + 1

    for mod in model.modules():
        if isinstance(mod, SelfAttention):
            handles.append(mod.register_forward_pre_hook(record))
    _trial_forward(model, x, handles)
    return shapes


def bench_gemm(args):
    """How close a classifier's forward runs to this CPU's GEMM rate at the model's own matrix shapes.

    Each distinct GEMM of the forward (``gemm_shapes``) is timed alone through the linear the model itself uses here
    (oneDNN's or ``F.linear``, ``zoo.layers.linear``), the times are summed with their counts, and the sum is divided
    by the whole forward's time: 1.0 would mean everything but the GEMMs is free. The rest is attention (SDPA),
    LayerNorm, GELU, residual adds, reshapes and Python. The forward and its GEMMs are timed in ``--repeats``
    interleaved rounds (a change of load on a shared machine hits both alike; one pass of each swung the ratio from
    0.68 to 1.11 on an AVX-512 EPYC); the table gives the ratio of the medians and the median per-round ratio.

    A second share counts attention's own matrix products as GEMMs too (``attention_products``: Q K^T and P V of
    every head, timed alone as batched ``torch.matmul`` in the same rounds), so that only softmax, LayerNorm, GELU,
    residual adds, reshapes and Python are overhead; both shares are reported."""
    import zoo
    import zoo.layers.linear as L
    rows = []
    for name in args.models or ("sa_vit_base",):
        torch.manual_seed(0)
        m = zoo.load(name, img_size=args.img_size).eval()
        x = torch.randn(args.batch, 3, args.img_size, args.img_size)
        shapes = gemm_shapes(m, x)
        fused = L._ONEDNN_LINEAR is not None
        linear = L.onednn_linear if fused else torch.nn.functional.linear
        attn = attention_products(m, x)
        gemms, flops = [], 0
        for (mm, k, n, bias), count in sorted(shapes.items()):
            gemms.append((count, torch.randn(mm, k), torch.randn(n, k), torch.randn(n) if bias else None))
            flops += count * 2 * mm * k * n
        products, attn_flops = [], 0
        for (bh, n, d), count in sorted(attn.items()):
            products.append((count, torch.randn(bh, n, d), torch.randn(bh, d, n), torch.randn(bh, n, n),
                             torch.randn(bh, n, d)))
            attn_flops += count * 2 * (2 * bh * n * n * d)  # Q K^T and P V
        t_models, t_gemms, t_attn = [], [], []
        with torch.inference_mode():
            for _ in range(args.repeats):
                t_models.append(timer_median(lambda: m(x), args.min_run_time)[0])
                t_gemms.append(sum(count * timer_median(lambda: linear(a, w, b), args.min_run_time / 4)[0]
                                   for count, a, w, b in gemms))
                t_attn.append(sum(count * (timer_median(lambda: torch.matmul(q, kt), args.min_run_time / 4)[0]
                                           + timer_median(lambda: torch.matmul(p, v), args.min_run_time / 4)[0])
                                  for count, q, kt, p, v in products))
        t_model, gemm_s, attn_s = statistics.median(t_models), statistics.median(t_gemms), statistics.median(t_attn)
        row = dict(model=name, batch=args.batch, img_size=args.img_size,
                   linear="oneDNN" if fused else "F.linear", gemms=sum(shapes.values()), shapes=len(shapes),
                   rounds=args.repeats, model_ms=t_model * 1e3, gemms_alone_ms=gemm_s * 1e3,
                   gemm_gflops=flops / gemm_s / 1e9, model_gflops=flops / t_model / 1e9,
                   attentions=sum(attn.values()), attn_products_alone_ms=attn_s * 1e3)
        row["model / GEMM rate"] = gemm_s / t_model
        row["per-round ratio (median)"] = per_round_ratio(t_gemms, t_models)
        row["with attention products"] = (gemm_s + attn_s) / t_model
        row["with attention products, per round"] = statistics.median(
            (g + a) / t for g, a, t in zip(t_gemms, t_attn, t_models))
        row["all products GFLOP/s alone"] = (flops + attn_flops) / (gemm_s + attn_s) / 1e9
        rows.append(row)
        print(f"  {name:16s} forward {row['model_ms']:8.1f} ms, its {row['gemms']} GEMMs alone "
              f"{row['gemms_alone_ms']:8.1f} ms ({row['gemm_gflops']:.1f} GFLOP/s): "
              f"{row['model / GEMM rate']:.2f} of the GEMM rate; with the {row['attentions']} attentions' Q K^T and "
              f"P V ({row['attn_products_alone_ms']:.1f} ms alone) {row['with attention products']:.2f}", flush=True)
    return rows


# -- segmentation end to end ---------------------------------------------------------------------------------------
SEG_SIZES = (512, 1024, 2048)
SEG_HEADS = {"uper": "UPerNet", "segformer": "light head"}
SEG_CROP = 512
SEG_CLASSES = 150
# seg row modes -> table label. train: the segmentor's training step (its heads' losses without the full-resolution
# logits, zoo.heads.seg_loss); train-mmseg: the same step with mmseg's head losses; train-cp: train with gradient
# checkpointing of the trunk blocks.
SEG_MODES = {"infer": "infer", "train": "train step", "train-mmseg": "train step (mmseg loss)",
             "train-cp": "train step (checkpointing)"}
TRAIN_MODES = ("train", "train-mmseg", "train-cp")


def _seg_batch(n, res, num_classes, seed=0):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, res, res, generator=g)
    samples = []
    for _ in range(n):
        s = SegDataSample(metainfo=dict(img_shape=(res, res), ori_shape=(res, res), pad_shape=(res, res)))
        s.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, res, res), generator=g))
        samples.append(s)
    return x, samples


def seg_worker(job):
    """One seg row in this (fresh) process: peak memory of the first call, then the timed calls. Prints JSON."""
    import zoo
    from zoo.cpu import PeakMemory
    torch.manual_seed(0)
    model = zoo.load(f"{job['mixer']}_vit_{job['size']}", task="seg", num_classes=SEG_CLASSES, img_size=SEG_CROP,
                     decode_head=job["head"])
    res = job["res"]
    if job["mode"] == "infer":
        model.eval()
        x = torch.randn(1, 3, res, res)

        # image -> label map as the seg configs evaluate: without the full-resolution logits (return_logits=False,
        # zoo.layers.resize_argmax; `--only seg-resize` compares it with mmseg's logits-then-argmax)
        model.test_cfg.return_logits = False

        def fn():
            with torch.no_grad():
                return model.predict(x)
    else:
        model.train().set_grad_checkpointing(job["mode"] == "train-cp")
        model.low_memory_loss = job["mode"] != "train-mmseg"
        x, samples = _seg_batch(job["batch"], res, SEG_CLASSES)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def fn():
            opt.zero_grad(set_to_none=True)
            loss, _ = model.parse_losses(model.loss(x, samples))
            loss.backward()
            opt.step()
    with PeakMemory() as mem:
        t = time.perf_counter()
        fn()
        first = time.perf_counter() - t
    med, times = timer_median(fn, job["min_run_time"], first)
    print(json.dumps(dict(job, ms=med * 1e3, runs=len(times), times=[round(t * 1e3, 2) for t in times],
                          first_ms=round(first * 1e3, 1), peak_mb=mem.mb)), flush=True)


def _extrapolate(points, tokens):
    """Value at ``tokens`` from measured (tokens, value) points: the last one scaled by the power law through the
    last two (exponent clipped to [1, 2]; 1 = linear when there is one point)."""
    (n1, v1) = points[-1]
    e = 1.0
    if len(points) > 1:
        import math
        (n0, v0) = points[-2]
        if v0 > 0 and v1 > 0:
            e = min(2.0, max(1.0, math.log(v1 / v0) / math.log(n1 / n0)))
    return v1 * (tokens / n1) ** e, e


def seg_skip_reason(row, history, args):
    """Why a seg row is not run (None: run it). ``history``: measured rows of the same head, mixer and mode."""
    if row["mixer"] == "ff" and row["mode"] in TRAIN_MODES and row["res"] != SEG_CROP:
        return f"ff trains on its {SEG_CROP}px crop only (fixed token count)"
    pts_ms = [(r["tokens"], r["ms"]) for r in history if "ms" in r]
    pts_mb = [(r["tokens"], r["peak_mb"]) for r in history if r.get("peak_mb")]
    if pts_ms:
        est_s = _extrapolate(pts_ms, row["tokens"])[0] / 1e3
        est_mb = _extrapolate(pts_mb, row["tokens"])[0] if pts_mb else None
        est = (f"estimated {est_s:.0f} s per call" + (f", {est_mb / 1024:.1f} GiB peak" if est_mb else "") +
               f" (extrapolated from the measured {', '.join(str(r['res']) for r in history if 'ms' in r)} px rows)")
        row["estimated_s"], row["estimated_mb"] = round(est_s, 1), est_mb and round(est_mb)
        avail = mem_available_bytes()
        if est_mb and avail and est_mb * 2 ** 20 * 1.2 > avail:
            return f"skipped: {est}; {avail / 2 ** 30:.1f} GiB available"
        if est_s > args.seg_max_seconds:
            return f"skipped: {est} > --seg-max-seconds {args.seg_max_seconds:.0f} (a row makes 2 calls)"
    return None


def bench_seg(args):
    """Segmentation end to end: every (head, size, mixer, mode) row in a fresh process (see the module docstring)."""
    rows = []
    for head in args.seg_heads:
        for res in args.seg_sizes:
            for mixer in args.seg_mixers:
                for mode in args.seg_modes:
                    row = dict(head=head, mixer=mixer, res=res, tokens=(res // 16) ** 2, mode=mode,
                               batch=1 if mode == "infer" else args.seg_train_batch)
                    rows.append(row)
                    history = [r for r in rows[:-1] if (r["head"], r["mixer"], r["mode"]) == (head, mixer, mode)]
                    label = f"  {SEG_HEADS[head]:10s} {res:4d}px {mixer:4s} {mode:5s}"
                    reason = seg_skip_reason(row, history, args)
                    if reason:
                        row["note"] = reason
                        print(f"{label}  {reason}", flush=True)
                        continue
                    job = dict(row, size=args.seg_model_size, min_run_time=args.min_run_time)
                    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
                    cmd = [sys.executable, os.path.abspath(__file__), "--_seg-worker", json.dumps(job), "--threads",
                           str(args.threads)]
                    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    out = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
                    if r.returncode != 0 or not out:
                        why = "killed (out of memory?)" if r.returncode in (-9, 137) else f"rc {r.returncode}"
                        row["note"] = f"failed: {why}: {r.stderr.strip().splitlines()[-1:] or ''}"
                        print(f"{label}  {row['note']}", flush=True)
                        continue
                    row.update({k: out[-1][k] for k in ("ms", "runs", "times", "first_ms", "peak_mb")})
                    print(f"{label}  {row['ms'] / 1e3:8.2f} s ({row['runs']} timed)  peak {row['peak_mb']:.0f} MB",
                          flush=True)
    return rows


def seg_table(rows, head):
    """One line per (size, mixer): times, speed-up against sa (same size, same run) and peak memory."""
    out = []
    for res in dict.fromkeys(r["res"] for r in rows if r["head"] == head):
        get = {(r["mixer"], r["mode"]): r for r in rows if r["head"] == head and r["res"] == res}
        for mixer in dict.fromkeys(r["mixer"] for r in rows if r["head"] == head and r["res"] == res):
            line = {"px": res, "tokens": (res // 16) ** 2, "mixer": mixer}
            for mode, label in SEG_MODES.items():
                if mode not in ("infer", "train") and not any(m == mode for _, m in get):  # optional columns
                    continue
                r, sa = get.get((mixer, mode), {}), get.get(("sa", mode), {})
                line[f"{label} s"] = r["ms"] / 1e3 if "ms" in r else "-"
                line[f"{label} x sa"] = round(sa["ms"] / r["ms"], 2) if "ms" in r and "ms" in sa else "-"
                line[f"{label} MB"] = r.get("peak_mb", "-") if "ms" in r else (
                    f"~{r['estimated_mb']} (est.)" if r.get("estimated_mb") else "-")
            out.append(line)
    return out


def bench_seg_heads(args):
    """Neck + decode head alone on four random (1, D, R/16, R/16) maps (D of ``--seg-model-size``)."""
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    import zoo.heads.seg as seg
    from zoo.heads import light_head
    D, R = seg.embed_dim_of(f"sa_vit_{args.seg_model_size}"), args.seg_heads_res
    torch.manual_seed(0)
    feats = tuple(torch.randn(1, D, R // 16, R // 16) for _ in range(4))
    norm = dict(type="BN", requires_grad=True)

    def head(kind, **kw):
        return dict(type=kind, in_index=[0, 1, 2, 3], in_channels=[D] * 4, num_classes=SEG_CLASSES, norm_cfg=norm,
                    align_corners=False, dropout_ratio=0.1, **kw)
    mln = dict(type="MultiLevelNeck", in_channels=[D] * 4, out_channels=D, scales=[4, 2, 1, 0.5])
    f2p4 = dict(type="Feature2Pyramid", embed_dim=D, rescales=[4, 2, 1, 0.5], norm_cfg=norm)
    f2p2 = dict(type="Feature2Pyramid", embed_dim=D, rescales=[2, 1, 0.5, 0.25], norm_cfg=norm)
    combos = {
        "UPerNet: MultiLevelNeck(4..0.5) + UPerHead 512": (mln, head("UPerHead", pool_scales=(1, 2, 3, 6),
                                                                     channels=512)),
        "MultiLevelNeck(4..0.5) + SegformerHead 128": (mln, head("SegformerHead", channels=128)),
        "Feature2Pyramid(4..0.5) + SegformerHead 128": (f2p4, head("SegformerHead", channels=128)),
        "Feature2Pyramid(2..0.25) + SegformerHead 256": (f2p2, head("SegformerHead", channels=256)),
        "Feature2Pyramid(2..0.25) + SegformerHead 128 (light head)": (f2p2, head("SegformerHead", channels=128)),
        "Feature2Pyramid(2..0.25) + FPNHead 128": (f2p2, head("FPNHead", channels=128,
                                                             feature_strides=[8, 16, 32, 64])),
        "no neck (stride 16) + SegformerHead 128": (None, head("SegformerHead", channels=128)),
        # what the segmentor runs at inference: the trunk's maps as channels-last views (ZooViTBackbone), and the
        # fusion conv before the resize (zoo.heads.light_head)
        "light head, channels-last maps": (f2p2, head("SegformerHead", channels=128), "channels_last"),
        "light head, channels-last maps, fused (zoo.heads.light_head)": (f2p2, head("SegformerHead", channels=128),
                                                                          "channels_last", "fused"),
    }
    feats_cl = tuple(f.contiguous(memory_format=torch.channels_last) for f in feats)
    rows = []
    with DefaultScope.overwrite_default_scope("mmseg"), torch.no_grad():
        for label, (neck_cfg, head_cfg, *how) in combos.items():
            neck = MODELS.build(neck_cfg).eval() if neck_cfg else (lambda f: f)
            dec = MODELS.build(head_cfg).eval()
            x = feats_cl if "channels_last" in how else feats

            def fn():
                return light_head.fused_forward(dec, neck(x)) if "fused" in how else dec(neck(x))
            t = time.perf_counter()
            fn()  # warm-up
            first = time.perf_counter() - t
            med, times = timer_median(fn, args.min_run_time, first)
            rows.append(dict(neck_and_head=label, px=R, ms=round(med * 1e3, 1), runs=len(times)))
            print(f"  {label:60s} {med * 1e3:9.1f} ms ({len(times)} timed)", flush=True)
    return rows


def _light_model(args, mixer):
    """The ``--seg-model-size`` light-head segmentor of ``mixer`` (seed 0, eval), labelling as the seg configs evaluate
    (``test_cfg.return_logits=False``)."""
    import zoo
    torch.manual_seed(0)
    model = zoo.load(f"{mixer}_vit_{args.seg_model_size}", task="seg", num_classes=SEG_CLASSES, img_size=SEG_CROP,
                     decode_head="segformer").eval()
    model.test_cfg.return_logits = False
    return model


def bench_seg_resize(args):
    """Light-head ``predict`` at ``--seg-heads-res``, image -> label map three ways, interleaved in one process:
    mmseg's way (logits resized in NCHW layout, then the argmax), the segmentor's ``predict`` with the resize in
    channels-last layout (``test_cfg.return_logits=True``), and without the full-size logits (``return_logits=False``:
    ``zoo.layers.resize_argmax``, what the seg configs evaluate with). The label maps are compared with mmseg's."""
    import torch.nn.functional as F
    R, rows = args.seg_heads_res, []
    x = torch.randn(1, 3, R, R, generator=torch.Generator().manual_seed(0))
    for mixer in args.seg_mixers:
        if mixer == "ff":  # fixed token count: slides its crop, a different path
            continue
        model = _light_model(args, mixer)

        def nchw():
            low = model.decode_head(model.extract_feat(x))  # backbone + neck + head: logits at stride 8
            return model.postprocess_result(F.interpolate(low, size=(R, R), mode="bilinear", align_corners=False))

        def predict(return_logits):
            def fn():
                model.test_cfg.return_logits = return_logits
                return model.predict(x)
            return fn
        ways = {"nchw": nchw, "channels_last": predict(True), "labels_only": predict(False)}
        with torch.no_grad():
            ref = nchw()[0].pred_sem_seg.data
            differ = {k: int((fn()[0].pred_sem_seg.data != ref).sum()) for k, fn in ways.items() if k != "nchw"}
            times = {k: [] for k in ways}
            for _ in range(args.repeats):
                for name, fn in ways.items():
                    t = time.perf_counter()
                    fn()
                    times[name].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append(dict(mixer=mixer, px=R, nchw_s=round(med["nchw"], 3),
                         channels_last_s=round(med["channels_last"], 3), labels_only_s=round(med["labels_only"], 3),
                         channels_last_x=round(med["nchw"] / med["channels_last"], 2),
                         labels_only_x=round(med["nchw"] / med["labels_only"], 2),
                         pixels_differing=differ, rounds=args.repeats))
        print(f"  {mixer:4s} {R}px predict: NCHW resize {med['nchw']:.3f} s, channels-last "
              f"{med['channels_last']:.3f} s ({med['nchw'] / med['channels_last']:.2f}x), labels only "
              f"{med['labels_only']:.3f} s ({med['nchw'] / med['labels_only']:.2f}x); pixels differing from mmseg's "
              f"labels: {differ}", flush=True)
    return rows


def _predict_ab(args, modes, section):
    """Light-head ``predict`` (image -> label map, as the seg configs evaluate) at each ``--seg-sizes`` per mixer, in
    two ways interleaved round by round in one process. ``modes`` is ``{new: switch, old: switch}`` (two names, the
    new way first), where ``switch(model, on)`` turns the way on (``on=True``) or restores the default
    (``on=False``). Rows: each way's median (``<name>_s``), old / new (``speedup``, and the median of the per-round
    ratios) and the pixels whose label differs between the two ways."""
    new, old = modes
    rows = []
    for R in args.seg_sizes:
        x = torch.randn(1, 3, R, R, generator=torch.Generator().manual_seed(0))
        for mixer in args.seg_mixers:
            if mixer == "ff":  # fixed token count: slides its crop
                continue
            model = _light_model(args, mixer)
            times, labels = {k: [] for k in modes}, {}

            def run(name):
                modes[name](model, True)
                try:
                    return model.predict(x)
                finally:
                    modes[name](model, False)
            with torch.no_grad():
                for name in modes:  # warm-up, and the labels of each
                    labels[name] = run(name)[0].pred_sem_seg.data
                for _ in range(args.repeats):
                    for name in modes:
                        t = time.perf_counter()
                        run(name)
                        times[name].append(time.perf_counter() - t)
            med = {k: statistics.median(v) for k, v in times.items()}
            row = dict(mixer=mixer, px=R, **{f"{old}_s": round(med[old], 3), f"{new}_s": round(med[new], 3)},
                       speedup=round(med[old] / med[new], 3),
                       per_round=round(per_round_ratio(times[old], times[new]), 3),
                       pixels_differing=int((labels[new] != labels[old]).sum()), rounds=args.repeats)
            rows.append(row)
            print(f"  {mixer:4s} {R}px predict: {old} {med[old]:.3f} s, {new} {med[new]:.3f} s "
                  f"({row['speedup']:.3f}x, {section}); pixels differing: {row['pixels_differing']}", flush=True)
    return rows


def seg_gflop(model, size):
    """GFLOP of a segmentor's image -> head logits for one ``size`` x ``size`` image (what ``predict`` computes
    before ``resize_argmax``, whose work is comparisons, not FLOPs): torch's ``FlopCounterMode`` over a copy of the
    model on the meta device, so nothing is computed. It counts matrix products and convolutions (a multiply-add is
    2 FLOPs); softmax attention runs its math kernel there, counted as its two products. Elementwise work (softmax,
    norms, GELU, exp) is not counted. The ratio of two mixers' counts is the speed ratio they would have if every
    product ran at the same rate."""
    import copy
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    meta = copy.deepcopy(model).to("meta")
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        meta._head_logits(torch.empty(1, 3, size, size, device="meta"))
    return counter.get_total_flops() / 1e9


class _Bf16Predict:
    """``predict`` of a segmentor under bf16 autocast (the ``--seg-bf16`` rows)."""

    def __init__(self, model):
        self.model = model

    def predict(self, x):
        with _autocast():
            return self.model.predict(x)


def minor_faults():
    """Minor page faults of this process so far (``getrusage``; its threads included): a call that writes fresh pages
    (memory the allocator took from the system) pays one per 4 KiB page."""
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def bench_seg_rounds(args):
    """Light-head ``predict`` (image -> label map) of every ``--seg-mixers`` model in one process, the mixers
    interleaved round by round (``--repeats`` rounds after a warm-up) at each ``--seg-sizes``: medians and each
    mixer's ratio to ``sa`` in the same rounds, which the shared machine's drift affects alike. Each row also has
    the model's GFLOP (``seg_gflop``), its rate (GFLOP / median time) and ``sa``'s GFLOP over its own, the ratio
    the times would have at equal rates, and its median of minor page faults per call (0 where the process's heap
    already holds the memory a call needs; docs/BENCHMARKS.md). ``--seg-int8`` adds each model with int8 linears
    (``zoo.cpu.int8_dynamic``) to the same rounds as ``"{mixer} int8"``, and ``--seg-bf16`` each model under bf16
    autocast as ``"{mixer} bf16"`` (on a CPU with native bf16; ``--emulated-bf16`` times it elsewhere), each with
    its float32 time over its own (``x_fp32``) and its ratio to ``sa`` in the same precision (``x_sa``)."""
    from zoo import cpu
    rows = []
    mixers = [m for m in args.seg_mixers if m != "ff"]  # ff slides its crop: a different path
    bf16 = args.seg_bf16
    if bf16 and bf16_skip_reason() and not args.emulated_bf16:
        print(f"  --seg-bf16: {bf16_skip_reason()} (--emulated-bf16 times them anyway)", flush=True)
        bf16 = False
    for R in args.seg_sizes:
        x = torch.randn(1, 3, R, R, generator=torch.Generator().manual_seed(0))
        models = {mixer: _light_model(args, mixer) for mixer in mixers}
        gflop = {mixer: seg_gflop(model, R) for mixer, model in models.items()}
        if args.seg_int8:  # the same models with int8 linears, in the same rounds ("sa int8", ...)
            for mixer in mixers:
                models[f"{mixer} int8"] = cpu.int8_dynamic(models[mixer])
                gflop[f"{mixer} int8"] = gflop[mixer]
        if bf16:  # the same models under bf16 autocast ("sa bf16", ...)
            for mixer in mixers:
                models[f"{mixer} bf16"] = _Bf16Predict(models[mixer])
                gflop[f"{mixer} bf16"] = gflop[mixer]
        times, faults = {m: [] for m in models}, {m: [] for m in models}
        with torch.no_grad():
            for model in models.values():
                model.predict(x)  # warm-up
            for _ in range(args.repeats):
                for mixer, model in models.items():
                    f, t = minor_faults(), time.perf_counter()
                    model.predict(x)
                    times[mixer].append(time.perf_counter() - t)
                    faults[mixer].append(minor_faults() - f)
        med = {m: statistics.median(v) for m, v in times.items()}
        for mixer in models:
            sig4 = lambda t: float(f"{t:.4g}")  # noqa: E731 - 4 significant figures: 3 decimals lose 7% at 64 px
            row = dict(mixer=mixer, px=R, infer_s=sig4(med[mixer]), rounds=args.repeats,
                       times=[sig4(t) for t in times[mixer]], gflop=float(f"{gflop[mixer]:.4g}"),
                       gflop_per_s=round(gflop[mixer] / med[mixer], 1),
                       minor_faults=int(statistics.median(faults[mixer])))
            variant = mixer.partition(" ")[2]  # "", "int8" or "bf16"
            if variant:
                fp32 = mixer.partition(" ")[0]
                row["x_fp32"] = round(med[fp32] / med[mixer], 2)
                row["x_fp32_per_round"] = round(per_round_ratio(times[fp32], times[mixer]), 2)
                if f"sa {variant}" in med:  # x_sa stays against float32 sa; this is sa in the same precision
                    row["x_sa_same_precision"] = round(med[f"sa {variant}"] / med[mixer], 2)
            if "sa" in med:
                row["x_sa"] = round(med["sa"] / med[mixer], 2)
                row["x_sa_per_round"] = round(per_round_ratio(times["sa"], times[mixer]), 2)
                row["x_sa_flops"] = round(gflop["sa"] / gflop[mixer], 2)
            rows.append(row)
            print(f"  {mixer:9s} {R}px predict {med[mixer]:.3f} s, {row['gflop']:.1f} GFLOP at "
                  f"{row['gflop_per_s']:.0f} GFLOP/s" + (f" ({row['x_sa']:.2f}x sa; {row['x_sa_flops']:.2f}x in FLOPs)"
                                                        if "x_sa" in row else ""), flush=True)
    return rows


def bench_mlp_chunk(args):
    """The channel MLP over blocks of rows at CPU inference (``zoo.layers.mlp.CHUNK_ROWS``, "blocks") against one shot
    (``CHUNK_ROWS`` set to a count no input reaches), light-head ``predict`` (``_predict_ab``)."""
    import zoo.layers.mlp as M
    default = M.CHUNK_ROWS

    def one_shot(model, on):
        M.CHUNK_ROWS = 1 << 62 if on else default
    return _predict_ab(args, {"blocks": lambda model, on: None, "one_shot": one_shot}, "one shot / blocks")


def bench_mlp_gelu(args):
    """The channel MLP's GELU written over fc1's output at inference (``zoo.layers.mlp.INPLACE_GELU``, "in_place")
    against a second hidden tensor ("new_tensor"), light-head ``predict`` (``_predict_ab``)."""
    import zoo.layers.mlp as M

    def new_tensor(model, on):
        M.INPLACE_GELU = not on
    return _predict_ab(args, {"in_place": lambda model, on: None, "new_tensor": new_tensor}, "new tensor / in place")


def bench_ea_chunk(args):
    """``ea``'s token blocks at inference: ``ExternalAttention.chunk_tokens`` as it is ("default") against 512 tokens
    a block ("chunk512", the default until 2026-12-07), light-head ``predict`` (``_predict_ab``; the ``ea`` rows are
    the ones to read, the other mixers do not use it)."""
    from zoo.mixers.ea import ExternalAttention
    default = ExternalAttention.chunk_tokens

    def chunk512(model, on):
        ExternalAttention.chunk_tokens = 512 if on else default
    return _predict_ab(args, {"default": lambda model, on: None, "chunk512": chunk512}, "512 / default")


def bench_head_paths(args):
    """The light head's inference paths ("fused"): the trunk's maps as channels-last views and the fusion conv before
    the resize (``zoo.heads.light_head``), against mmseg's ``SegformerHead.forward`` on contiguous NCHW maps
    ("mmseg"), light-head ``predict`` (``_predict_ab``)."""
    from zoo.heads import light_head
    fused = light_head.fused_forward

    def mmseg_way(model, on):
        model.backbone.channels_last_maps = not on
        light_head.fused_forward = (lambda head, inputs: head.forward(inputs)) if on else fused
    return _predict_ab(args, {"fused": lambda model, on: None, "mmseg": mmseg_way}, "mmseg / fused")


def bench_tasks(quick):
    rows, failures = {}, []
    tasks_dir = os.path.join(REPO, "tasks")
    for task in sorted(os.listdir(tasks_dir)) if os.path.isdir(tasks_dir) else []:
        if not os.path.isfile(os.path.join(tasks_dir, task, "bench.py")):
            continue
        print(f"task {task}: tasks/{task}/bench.py:run(quick={quick})", flush=True)
        try:
            rows[task] = importlib.import_module(f"tasks.{task}.bench").run(quick)
        except Exception:  # one task's failure must not hide the others' numbers; it is reported and fails the run
            failures.append(task)
            rows[task] = [dict(error=traceback.format_exc(limit=3).strip().splitlines()[-1])]
            traceback.print_exc()
    return rows, failures


# -- reporting ------------------------------------------------------------------------------------------------------
def fmt(v):
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def table(rows, cols=None):
    if not rows:
        return "(no rows)"
    cols = cols or list(dict.fromkeys(k for r in rows for k in r))
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def mixer_table(rows, tokens):
    out = []
    for name in dict.fromkeys(r["mixer"] for r in rows):
        row = {"mixer": name}
        for n in tokens:
            r = next((r for r in rows if r["mixer"] == name and r["tokens"] == n), {})
            row[f"ms @ {n}"] = r.get("ms", "-")
            row[f"MB @ {n}"] = r.get("peak_mb", "-")
        out.append(row)
    return out


def check_targets(res, tokens):
    from zoo import cpu
    lines, ok = [], True
    fast_path = cpu.fast_path()[0]
    mix = {(r["mixer"], r["tokens"]): r for r in res.get("mixers", []) if "ms" in r}
    if 1024 in tokens and 16384 in tokens:
        for name in ("ea", "effa"):
            a, b = mix.get((name, 16384)), mix.get((name, 1024))
            if a and b:
                ratio = a["ms"] / b["ms"]
                ok &= ratio <= 18
                paired = per_round_ratio(a["times"], b["times"])
                lines.append(f"{name}: time(16384) / time(1024) = {ratio:.1f} (target <= 18, linear = 16; median of "
                             f"per-round ratios {paired:.1f}): {'PASS' if ratio <= 18 else 'FAIL'}")
    seg = {(r["head"], r["res"], r["mixer"]): r for r in res.get("seg", []) if r["mode"] == "infer" and "ms" in r}
    for res_px, goal in ((1024, 3.0), (2048, 8.0)):
        sa = seg.get(("segformer", res_px, "sa"))
        for name in ("ea", "effa"):
            r = seg.get(("segformer", res_px, name))
            if sa and r:
                ratio = sa["ms"] / r["ms"]
                lines.append(f"seg light head {res_px}px: sa / {name} inference time = {ratio:.2f} (goal >= {goal:g}): "
                             f"{'PASS' if ratio >= goal else 'FAIL'}")
    for r in res.get("gemm", []):
        if r["model"] == "sa_vit_base":
            share = r["model / GEMM rate"]
            lines.append(f"sa_vit_base forward at {share:.2f} of the GEMM rate at its own shapes (goal >= 0.85): "
                         f"{'PASS' if share >= 0.85 else 'FAIL'}")
            share = r["with attention products"]
            lines.append(f"  the same with attention's Q K^T and P V counted as GEMMs: {share:.2f}: "
                         f"{'PASS' if share >= 0.85 else 'FAIL'}")
    models = {(r["model"], r["impl"]): r for r in res.get("models", [])}
    for name in TIMM_NAMES:
        timm_row = models.get((name, "timm eager"))
        if not timm_row:
            continue
        for impl in ("zoo fp32", "zoo bf16 autocast", "zoo int8 dynamic", "zoo bf16 compile", "zoo fp32 compile"):
            r = models.get((name, impl))
            if r:
                ratio = r["images_per_s"] / timm_row["images_per_s"]
                goal = 1.0 if impl == "zoo fp32" else FAST_PATH_GOAL  # the faster paths: issue 13's 1.2x
                good = ratio >= goal
                if impl == "zoo fp32" or impl == FAST_PATH[fast_path]:
                    ok &= good
                lines.append(f"{name} {impl} / timm eager images/s = {ratio:.2f} (target >= {goal:g}"
                             f"{', the fast path here' if impl == FAST_PATH[fast_path] else ''}): "
                             f"{'PASS' if good else 'FAIL'}")
    return lines, ok


def plot(res, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot skipped: matplotlib is not installed (pip install matplotlib)")
        return None
    mix, models = res.get("mixers", []), res.get("models", [])
    if not mix and not models:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for name in dict.fromkeys(r["mixer"] for r in mix):
        pts = [(r["tokens"], r["ms"], r.get("peak_mb")) for r in mix if r["mixer"] == name and "ms" in r]
        if pts:
            axes[0].plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=name)
            mem = [(p[0], p[2]) for p in pts if p[2] is not None]
            if mem:
                axes[1].plot([m[0] for m in mem], [max(m[1], 0.1) for m in mem], "o-", label=name)
    for ax, title, unit in ((axes[0], "mixer forward time", "ms"), (axes[1], "mixer peak memory", "MB")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens N (C=384, 6 heads, batch 1)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_lines():
            ax.legend()
    if models:
        labels = [f"{r['model']}\n{r['impl']}" for r in models]
        axes[2].barh(range(len(models)), [r["images_per_s"] for r in models])
        axes[2].set_yticks(range(len(models)), labels, fontsize=6)
        axes[2].invert_yaxis()
        axes[2].set_xlabel(f"images/s (batch {models[0]['batch']}, {models[0]['img_size']}px)")
        axes[2].set_title("classifiers")
    fig.suptitle(res["meta"]["title"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# The sections of the run: (--only name, result key, what it prints first (formatted with the arguments and
# ``interleaved``), the measurement), in the order they run; ``tasks`` (tasks/<task>/bench.py) runs after them.
RUNS = [
    ("mixers", "mixers", "mixers (C={dim}, {heads} heads, batch 1, median of {repeats})", bench_mixers),
    ("mixers-train", "mixers_train", "mixers training (C={dim}, {heads} heads, batch {train_batch}, forward + "
                                     "backward, median of {interleaved})", bench_mixers_train),
    ("linear", "linear", "oneDNN linear vs F.linear (batch {batch}, {img_size}px, {interleaved})", bench_linear),
    ("gemm", "gemm", "GEMM share (batch {batch}, {img_size}px, forward vs its GEMMs timed alone)", bench_gemm),
    ("seg-heads", "seg_heads", "seg heads ({seg_heads_res}px, neck + decode head alone)", bench_seg_heads),
    ("seg-resize", "seg_resize", "seg logits resize ({seg_heads_res}px, light head, predict, {interleaved})",
     bench_seg_resize),
    ("seg-rounds", "seg_rounds", "seg end to end, mixers interleaved (light-head predict, sizes {seg_sizes}, "
                                 "{repeats} rounds)", bench_seg_rounds),
    ("head-paths", "head_paths", "light head's inference paths (light-head predict, sizes {seg_sizes}, "
                                 "{interleaved})", bench_head_paths),
    ("mlp-chunk", "mlp_chunk", "channel MLP in row blocks (light-head predict, sizes {seg_sizes}, {interleaved})",
     bench_mlp_chunk),
    ("ea-chunk", "ea_chunk", "ea's token blocks, default vs 512 (light-head predict, sizes {seg_sizes}, "
                             "{interleaved})", bench_ea_chunk),
    ("mlp-gelu", "mlp_gelu", "the MLP's GELU in place (light-head predict, sizes {seg_sizes}, {interleaved})",
     bench_mlp_gelu),
    ("seg", "seg", "seg end to end (heads {seg_heads}, sizes {seg_sizes}, mixers {seg_mixers})", bench_seg),
    ("models", "models", "classifiers (batch {batch}, {img_size}px, median of {interleaved})",
     lambda a: bench_models(a, timm_python=a.timm_python)),
    ("int8-top1", "int8_top1", "int8 linears' top-1 (bundled Fashion-MNIST classifiers, t10k)", bench_int8_top1),
]
SECTIONS = tuple(section for section, *_ in RUNS) + ("tasks",)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short run: 3 repeats, N up to 4096, tasks in quick mode")
    p.add_argument("--only", default="mixers,models", help=f"comma-separated sections: {', '.join(SECTIONS)} "
                   "(default mixers,models; --tasks adds tasks)")
    p.add_argument("--tasks", action="store_true", help="also run tasks/<task>/bench.py:run(quick)")
    p.add_argument("--timm-python", default=None, help="python of a venv with timm (compare with timm's ViTs)")
    p.add_argument("--fast", action="store_true", help="also time the bf16 autocast path of the classifiers")
    p.add_argument("--emulated-bf16", action="store_true",
                   help="with --fast: time the bf16 rows even where bf16 is emulated (to measure what that costs)")
    p.add_argument("--compile", nargs="?", const="freezing", choices=("freezing", "max-autotune"), default=None,
                   help="also time torch.compile'd classifiers, Inductor with freezing (default) or also max-autotune "
                   "(slow to compile)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    p.add_argument("--seg-int8", action="store_true",
                   help="--only seg-rounds: also time each segmentor with int8 linears (zoo.cpu.int8_dynamic)")
    p.add_argument("--seg-bf16", action="store_true",
                   help="--only seg-rounds: also time each segmentor under bf16 autocast (native bf16 CPUs only, "
                        "unless --emulated-bf16)")
    p.add_argument("--fmnist-root", default=FASHION_MNIST_ROOT,
                   help="Fashion-MNIST IDX files (--only int8-top1)")
    p.add_argument("--repeats", type=int, default=None, help="timed runs per measurement (default 7, quick 3)")
    p.add_argument("--min-run-time", type=float, default=None,
                   help="seconds of timed calls per measurement (torch.utils.benchmark blocked_autorange; default 2, "
                        "quick 0.5)")
    p.add_argument("--models", nargs="+", default=None, help="classifiers for the models and linear sections "
                   "(default: every *_vit_small and sa_vit_base)")
    p.add_argument("--seg-sizes", type=int, nargs="+", default=list(SEG_SIZES), help="seg image sides in pixels")
    p.add_argument("--seg-heads", default="uper,segformer", help="seg decode heads: uper, segformer (the light one)")
    p.add_argument("--seg-mixers", default="sa,ea,effa,ff", help="seg mixers")
    p.add_argument("--seg-modes", default="infer,train", help=f"seg rows: {', '.join(SEG_MODES)} (train-mmseg: the "
                   "training step with mmseg's head losses; train-cp: with gradient checkpointing of the trunk)")
    p.add_argument("--seg-model-size", default="tiny", help=argparse.SUPPRESS)
    p.add_argument("--seg-train-batch", type=int, default=2, help="images per seg training step (default 2: the "
                   "configs' images per GPU; UPerNet's pool-scale-1 BN cannot train on one image)")
    p.add_argument("--seg-max-seconds", type=float, default=240.0,
                   help="skip a seg row whose call is estimated (from its smaller sizes) to take longer")
    p.add_argument("--seg-heads-res", type=int, default=1024, help="image side for --only seg-heads")
    p.add_argument("--tokens", type=int, nargs="+", default=None, help=f"token counts (default {TOKENS})")
    p.add_argument("--train-tokens", type=int, nargs="+", default=[256, 4096],
                   help="token counts of --only mixers-train (default 256 4096)")
    p.add_argument("--train-batch", type=int, default=1, help="sequences per step of --only mixers-train")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--img-size", type=int, default=224)
    p.add_argument("--ff-max-tokens", type=int, default=None, help="skip ff above this N (its weights grow as N^2)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory worker")
    p.add_argument("--out", default=os.path.join(REPO, "bench_out"), help="folder for benchmark.json/.png")
    p.add_argument("--_memory-worker", dest="memory_worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_seg-worker", dest="seg_worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.min_run_time = args.min_run_time or (0.5 if args.quick else 2.0)
    args.seg_heads = [h for h in args.seg_heads.split(",") if h]
    args.seg_mixers = [m for m in args.seg_mixers.split(",") if m]
    args.seg_modes = [m for m in args.seg_modes.split(",") if m]
    unknown = set(args.seg_heads) - set(SEG_HEADS)
    if unknown:
        p.error(f"--seg-heads: unknown {sorted(unknown)}; choose from {sorted(SEG_HEADS)}")
    if set(args.seg_modes) - set(SEG_MODES):
        p.error(f"--seg-modes: unknown {sorted(set(args.seg_modes) - set(SEG_MODES))}; choose from "
                f"{', '.join(SEG_MODES)}")
    unknown = set(args.only.split(",")) - set(SECTIONS)
    if unknown:
        p.error(f"--only: unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    args.repeats = args.repeats or (3 if args.quick else 7)
    args.tokens = args.tokens or (TOKENS[:3] if args.quick else TOKENS)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.threads = torch.get_num_threads()
    if args.memory_worker:
        memory_worker(json.loads(args.memory_worker))
        return 0
    if args.seg_worker:
        seg_worker(json.loads(args.seg_worker))
        return 0
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    from zoo import cpu as zoo_cpu
    meta = dict(torch=torch.__version__, threads=args.threads, cpu=zoo_cpu.cpu_model(), machine=zoo_cpu.describe(),
                cores=os.cpu_count(), loadavg_start=load,
                command=" ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    meta["title"] = (f"zoo benchmark {meta['utc']} UTC, torch {meta['torch']}, {args.threads} threads, "
                     f"load {load[0]:.1f}" if load else "")
    print(f"zoo benchmark: torch {torch.__version__}, {args.threads} threads, load average {load}\n"
          f"machine: {meta['machine']}", flush=True)
    res = dict(meta=meta)
    sections = set(args.only.split(","))
    interleaved = f"{args.repeats} interleaved rounds"
    for section, key, header, measure in RUNS:
        if section in sections:
            print(header.format(**vars(args), interleaved=interleaved) + ":", flush=True)
            res[key] = measure(args)
    failures = []
    if args.tasks or "tasks" in sections:
        res["tasks"], failures = bench_tasks(args.quick)
    meta["loadavg_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None

    print(f"\n{meta['title']}\nmachine: {meta['machine']}\n")
    if res.get("mixers"):
        print(f"### Mixers: forward time (ms) and peak memory (MB), C={args.dim}, {args.heads} heads, batch 1\n")
        print(table(mixer_table(res["mixers"], args.tokens)) + "\n")
        notes = [f"{r['mixer']} N={r['tokens']}: {r['note']}" for r in res["mixers"] if "note" in r]
        print("\n".join(notes) + ("\n" if notes else ""))
    trunk, rounds = f"*_vit_{args.seg_model_size}", f"medians of {args.repeats} interleaved rounds"
    plain_tables = [  # (result key, title, columns or None for all)
        ("models", f"Classifiers: batch {args.batch}, {args.img_size}x{args.img_size}",
         ["model", "impl", "ms", "images_per_s", "peak_mb"]),
        ("mixers_train", f"Mixers, one training step alone: C={args.dim}, {args.heads} heads, batch "
                         f"{args.train_batch}, forward + backward, {rounds}; saved MB = what autograd keeps for the "
                         f"backward pass (input and weights excluded); x sa = sa's ms / this ms",
         ["mixer", "tokens", "ms", "x_sa", "saved_mb"]),
        ("linear", f"oneDNN linear vs F.linear: batch {args.batch}, {args.img_size}px, inference", None),
        ("int8_top1", "int8 linears (zoo.cpu.int8_dynamic) against float32: top-1 (%) of the bundled classifiers "
                      "on Fashion-MNIST t10k, and the share of images both give the same class", None),
        ("gemm", f"GEMM share: batch {args.batch}, {args.img_size}px; model / GEMM rate = (the forward's GEMMs "
                 f"timed alone, summed) / (the forward); 'with attention products' adds Q K^T and P V to the GEMMs",
         None),
        ("seg_heads", f"Seg heads: neck + decode head alone, {args.seg_heads_res}px image, {trunk} maps", None),
        ("seg_resize", f"Seg logits resize: light head, {args.seg_heads_res}px, predict (image -> labels), {rounds}",
         None),
        ("mlp_chunk", f"Channel MLP in row blocks vs one shot: light-head predict (image -> labels), {trunk}, "
                      f"{rounds}", None),
        ("mlp_gelu", f"The MLP's GELU in place vs into a new tensor: light-head predict (image -> labels), {trunk}, "
                     f"{rounds}", None),
        ("seg_rounds", f"Seg end to end, light head, mixers interleaved in one process: predict (image -> labels), "
                       f"{trunk}, medians of {args.repeats} rounds; x sa = sa's median / this median; x sa in "
                       f"FLOPs = sa's GFLOP / this GFLOP (the ratio at equal rates); minor_faults = median page "
                       f"faults per call",
         ["mixer", "px", "infer_s", "x_sa", "x_sa_per_round", "gflop", "gflop_per_s", "x_sa_flops", "minor_faults",
          "rounds"]
         + (["x_fp32", "x_fp32_per_round", "x_sa_same_precision"] if args.seg_int8 or args.seg_bf16 else [])),
        ("head_paths", f"Light head's inference paths (channels-last maps + fused head) vs mmseg's (NCHW maps + "
                       f"SegformerHead.forward): predict (image -> labels), {trunk}, {rounds}", None),
    ]
    for key, title, cols in plain_tables:
        if res.get(key):
            print(f"### {title}\n")
            print(table(res[key], cols) + "\n")
    if res.get("seg"):
        for head in args.seg_heads:
            print(f"### Seg end to end, {SEG_HEADS[head]} ({head}): *_vit_{args.seg_model_size}, {SEG_CLASSES} "
                  f"classes; infer = one image to its label map (predict), no grad; train step = batch "
                  f"{args.seg_train_batch}, forward + backward + AdamW; x sa = sa's time / this time (same size, "
                  f"same run); MB = peak RSS growth of the row\n")
            print(table(seg_table(res["seg"], head)) + "\n")
        notes = [f"{SEG_HEADS[r['head']]} {r['res']}px {r['mixer']} {r['mode']}: {r['note']}" for r in res["seg"]
                 if "note" in r]
        print("\n".join(notes) + ("\n" if notes else ""))
    for task, rows in res.get("tasks", {}).items():
        print(f"### Task {task}\n\n{table(rows)}\n")
    lines, ok = check_targets(res, args.tokens)
    if lines:
        print("### Targets (ratios from this run)\n")
        print("\n".join(f"- {line}" for line in lines) + "\n")
    print(f"load average at the end: {meta['loadavg_end']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "benchmark.json"), "w") as f:
        json.dump(dict(res, targets=lines), f, indent=1)
    png = plot(res, os.path.join(args.out, "benchmark.png"))
    print(f"wrote {os.path.join(args.out, 'benchmark.json')}" + (f" and {png}" if png else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
