"""Speed and memory of the token mixers and classifiers (a benchmark, not a test).

    python tools/benchmark.py                                    # mixers + *_vit_small classifiers
    python tools/benchmark.py --timm-python /work/timm-venv/bin/python --fast   # + timm comparison, bf16 path
    python tools/benchmark.py --tasks                            # + every tasks/<task>/bench.py:run(quick)
    python tools/benchmark.py --quick                            # a short smoke run

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
  matmuls; LayerNorm / softmax stay float32), and with ``--compile`` also ``torch.compile``.
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
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import torch  # noqa: E402

TOKENS = (256, 1024, 4096, 16384)
TIMM_NAMES = {"sa_vit_small": "vit_small_patch16_224", "sa_vit_base": "vit_base_patch16_224"}


# -- timing ---------------------------------------------------------------------------------------------------------
def time_call(fn, runs, max_seconds=30.0, warmup=1):
    """Median wall time of ``fn()`` over ``runs`` calls after ``warmup`` calls (at least 3 calls, fewer than ``runs``
    only when they take longer than ``max_seconds`` in all). Returns (median seconds, list of times)."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < runs and (len(times) < 3 or time.perf_counter() - start < max_seconds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), times


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
                    med, times = time_call(lambda: m(x), args.repeats, max_seconds=args.max_seconds)
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


def _autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


def bench_models(args, timm_python=None):
    """Classifier throughput, interleaved round by round with the timm worker when there is one."""
    import zoo
    names = [n for n in zoo.list_models() if n.endswith("_vit_small")]
    if "sa_vit_base" not in names:
        names.append("sa_vit_base")
    torch.manual_seed(0)
    x = torch.randn(args.batch, 3, args.img_size, args.img_size)
    variants = {}  # label -> callable
    for name in names:
        torch.manual_seed(0)
        m = zoo.load(name, img_size=args.img_size).eval()
        variants[(name, "zoo fp32")] = (lambda m=m: m(x))
        if args.fast:
            variants[(name, "zoo bf16 autocast")] = (lambda m=m: _bf16_call(m, x))
        if args.compile:
            cm = torch.compile(m)
            variants[(name, "zoo fp32 compile")] = (lambda cm=cm: cm(x))
            if args.fast:
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


def _bf16_call(m, x):
    with _autocast():
        return m(x)


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
    lines, ok = [], True
    mix = {(r["mixer"], r["tokens"]): r for r in res.get("mixers", []) if "ms" in r}
    if 1024 in tokens and 16384 in tokens:
        for name in ("ea", "effa"):
            a, b = mix.get((name, 16384)), mix.get((name, 1024))
            if a and b:
                ratio = a["ms"] / b["ms"]
                ok &= ratio <= 18
                paired = statistics.median(x / y for x, y in zip(a["times"], b["times"]))
                lines.append(f"{name}: time(16384) / time(1024) = {ratio:.1f} (target <= 18, linear = 16; median of "
                             f"per-round ratios {paired:.1f}): {'PASS' if ratio <= 18 else 'FAIL'}")
    models = {(r["model"], r["impl"]): r for r in res.get("models", [])}
    for name in TIMM_NAMES:
        timm_row = models.get((name, "timm eager"))
        if not timm_row:
            continue
        for impl in ("zoo fp32", "zoo bf16 autocast", "zoo bf16 compile", "zoo fp32 compile"):
            r = models.get((name, impl))
            if r:
                ratio = r["images_per_s"] / timm_row["images_per_s"]
                good = ratio >= 1.0
                if impl == "zoo fp32" or impl.startswith("zoo bf16"):
                    ok &= good
                lines.append(f"{name} {impl} / timm eager images/s = {ratio:.2f} (target >= 1): "
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


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short run: 3 repeats, N up to 4096, tasks in quick mode")
    p.add_argument("--only", default="mixers,models", help="comma-separated sections: mixers, models, tasks "
                   "(default mixers,models; --tasks adds tasks)")
    p.add_argument("--tasks", action="store_true", help="also run tasks/<task>/bench.py:run(quick)")
    p.add_argument("--timm-python", default=None, help="python of a venv with timm (compare with timm's ViTs)")
    p.add_argument("--fast", action="store_true", help="also time the bf16 autocast path of the classifiers")
    p.add_argument("--compile", action="store_true", help="also time torch.compile'd classifiers (slow to compile)")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's default)")
    p.add_argument("--repeats", type=int, default=None, help="timed runs per measurement (default 7, quick 3)")
    p.add_argument("--max-seconds", type=float, default=30.0, help="stop repeating ff at one N once this is spent")
    p.add_argument("--tokens", type=int, nargs="+", default=None, help=f"token counts (default {TOKENS})")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--img-size", type=int, default=224)
    p.add_argument("--ff-max-tokens", type=int, default=None, help="skip ff above this N (its weights grow as N^2)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory worker")
    p.add_argument("--out", default=os.path.join(REPO, "bench_out"), help="folder for benchmark.json/.png")
    p.add_argument("--_memory-worker", dest="memory_worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
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
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    meta = dict(torch=torch.__version__, threads=args.threads, cpu=platform.processor() or platform.machine(),
                cores=os.cpu_count(), loadavg_start=load,
                command=" ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
                utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    meta["title"] = (f"zoo benchmark {meta['utc']} UTC, torch {meta['torch']}, {args.threads} threads, "
                     f"load {load[0]:.1f}" if load else "")
    print(f"zoo benchmark: torch {torch.__version__}, {args.threads} threads, load average {load}", flush=True)
    res = dict(meta=meta)
    sections = set(args.only.split(","))
    if "mixers" in sections:
        print(f"mixers (C={args.dim}, {args.heads} heads, batch 1, median of {args.repeats}):", flush=True)
        res["mixers"] = bench_mixers(args)
    if "models" in sections:
        print(f"classifiers (batch {args.batch}, {args.img_size}px, median of {args.repeats} interleaved rounds):",
              flush=True)
        res["models"] = bench_models(args, timm_python=args.timm_python)
    failures = []
    if args.tasks or "tasks" in sections:
        res["tasks"], failures = bench_tasks(args.quick)
    meta["loadavg_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None

    print(f"\n{meta['title']}\n")
    if res.get("mixers"):
        print(f"### Mixers: forward time (ms) and peak memory (MB), C={args.dim}, {args.heads} heads, batch 1\n")
        print(table(mixer_table(res["mixers"], args.tokens)) + "\n")
        notes = [f"{r['mixer']} N={r['tokens']}: {r['note']}" for r in res["mixers"] if "note" in r]
        print("\n".join(notes) + ("\n" if notes else ""))
    if res.get("models"):
        print(f"### Classifiers: batch {args.batch}, {args.img_size}x{args.img_size}\n")
        cols = ["model", "impl", "ms", "images_per_s", "peak_mb"]
        print(table(res["models"], cols) + "\n")
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
