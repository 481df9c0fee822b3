"""Speed and memory on a GPU (a benchmark, not a test): the classifiers against timm in one process on one torch,
and segmentation end to end at 512, 1024 and 2048 pixels, in float32 and under bf16 autocast.

    python tools/benchmark_gpu.py --out bench_gpu                       # a CUDA machine (~4 min on an H200)
    python tools/benchmark_gpu.py --device cpu --quick --seg-sizes 64 --seg-crop 64 --cls-batches 1 --cls-models sa_vit_small

What is measured (each number a median over ``--rounds`` rounds, the variants of one table interleaved round by
round so that a change of clock or load hits them alike; CUDA times by CUDA events around each call, after
warm-up calls that also let cuDNN choose its algorithms):

- **machine**: GPU name, multiprocessors, memory, torch and CUDA versions, and two ceilings measured here: a bf16
  and a float32 8192^3 matrix product (float32 as torch runs it by default: no TF32).
- **cls**: ``{sa,ea,effa,ff}_vit_small`` / ``_vit_base`` forward at 224 px for each ``--cls-batches``, float32
  and bf16 autocast, next to timm's ``vit_small_patch16_224`` / ``vit_base_patch16_224`` (random weights, the same
  input, imported into this process, so both run on this torch build). x timm = timm's time / the zoo model's.
- **seg**: the ``*_vit_tiny`` segmentor (150 classes, 512 crop) with the light head and UPerNet on one image at
  each ``--seg-sizes``: ``infer`` is image -> label map (``predict`` as the seg configs evaluate,
  ``test_cfg.return_logits=False``; ``ff`` slides its crop), ``train`` is one step (forward + backward + AdamW,
  batch 2, the configs' images per GPU; ``ff`` trains at its crop only). Peak memory is the growth of
  ``torch.cuda.max_memory_allocated`` during the row's first call (``zoo.cpu.PeakMemory``; on CPU the peak RSS
  growth). x sa = sa's time / this time, same table. GFLOP is the image -> logits count on the meta device
  (``tools/benchmark.py``'s ``seg_gflop``), and TFLOP/s that count over the inference time.

Results go to ``OUT/benchmark_gpu.json``; the tables are printed last.
"""
import argparse
import contextlib
import gc
import json
import os
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tools"))

import torch  # noqa: E402

TIMM_NAMES = {"sa_vit_small": "vit_small_patch16_224", "sa_vit_base": "vit_base_patch16_224"}
MIXERS = ("sa", "ea", "effa", "ff")


# -- timing ---------------------------------------------------------------------------------------------------------
def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_call(fn, device):
    """Seconds one ``fn()`` takes: CUDA events around it on a GPU (the queue drained first), a host clock on CPU."""
    if device.type == "cuda":
        sync(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def interleaved(variants, rounds, device, warmup=2):
    """``{key: [seconds per round]}``: every variant called ``warmup`` times, then once per round, round by round."""
    for fn in variants.values():
        for _ in range(warmup):
            fn()
    sync(device)
    times = {k: [] for k in variants}
    for _ in range(rounds):
        for key, fn in variants.items():
            times[key].append(timed_call(fn, device))
    return times


def precision(dtype, device):
    """The context a row runs in: nothing for float32, bf16 autocast for ``bf16``."""
    if dtype == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def free(device):
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# -- machine --------------------------------------------------------------------------------------------------------
def machine(device):
    from zoo import cpu
    info = dict(torch=torch.__version__, cpu=cpu.cpu_model(), device=str(device))
    for name in ("timm", "mmseg", "mmengine"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        info.update(gpu=p.name, multiprocessors=p.multi_processor_count, gpu_memory_gib=round(p.total_memory / 2 ** 30, 1),
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                    tf32_matmul=torch.backends.cuda.matmul.allow_tf32)
    return info


def gemm_ceiling(device, n, dtype, rounds):
    """TFLOP/s of an ``n``^3 matrix product in ``dtype`` on random data (median of ``rounds`` timed products)."""
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    times = interleaved({"mm": lambda: a @ b}, rounds, device)["mm"]
    return round(2 * n ** 3 / statistics.median(times) / 1e12, 1)


# -- classifiers ----------------------------------------------------------------------------------------------------
def bench_cls(args, device):
    import zoo
    try:
        import timm
    except ImportError as e:
        timm = None
        print(f"  timm rows skipped: {e} (install timm next to this torch to compare)", flush=True)
    rows = []
    for batch in args.cls_batches:
        x = torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(0)).to(device)
        for family in args.cls_families:
            names = [n for n in args.cls_models if n.endswith(f"_vit_{family}")]
            models = {}
            for name in names:
                torch.manual_seed(0)
                models[("zoo", name)] = zoo.load(name, img_size=224).eval().to(device)
            timm_name = TIMM_NAMES.get(f"sa_vit_{family}")
            if timm and timm_name and f"sa_vit_{family}" in names:
                torch.manual_seed(0)
                models[("timm", timm_name)] = timm.create_model(timm_name, pretrained=False).eval().to(device)
            variants = {}
            for dtype in args.dtypes:
                for (impl, name), m in models.items():
                    def fn(m=m, dtype=dtype):
                        with torch.inference_mode(), precision(dtype, device):
                            return m(x)
                    variants[(impl, name, dtype)] = fn
            times = interleaved(variants, args.rounds, device)
            med = {k: statistics.median(v) for k, v in times.items()}
            for (impl, name, dtype), t in med.items():
                row = dict(model=name, impl=impl, dtype=dtype, batch=batch, ms=round(t * 1e3, 3),
                           images_per_s=round(batch / t, 1), rounds=args.rounds)
                ref = ("timm", timm_name, dtype)
                if impl == "zoo" and name == f"sa_vit_{family}" and ref in med:
                    row["x_timm"] = round(med[ref] / t, 3)
                    row["x_timm_per_round"] = round(statistics.median(
                        a / b for a, b in zip(times[ref], times[(impl, name, dtype)])), 3)
                rows.append(row)
                print(f"  batch {batch:4d} {dtype:4s} {impl:4s} {name:22s} {t * 1e3:9.3f} ms" +
                      (f"  ({row['x_timm']:.3f}x timm)" if "x_timm" in row else ""), flush=True)
            del models, variants
            free(device)
    return rows


# -- segmentation ---------------------------------------------------------------------------------------------------
def seg_model(args, mixer, head, device):
    import zoo
    torch.manual_seed(0)
    model = zoo.load(f"{mixer}_vit_{args.seg_model_size}", task="seg", num_classes=args.seg_classes,
                     img_size=args.seg_crop, decode_head=head).to(device)
    model.test_cfg.return_logits = False
    return model


def seg_step(args, model, mode, res, dtype, device):
    """The callable of one row: ``predict`` of one image, or one training step on a batch of ``--seg-train-batch``."""
    from benchmark import _seg_batch
    if mode == "infer":
        model.eval()
        x = torch.randn(1, 3, res, res, generator=torch.Generator().manual_seed(0)).to(device)

        def fn():
            with torch.no_grad(), precision(dtype, device):
                return model.predict(x)
        return fn
    model.train()
    x, samples = _seg_batch(args.seg_train_batch, res, args.seg_classes)
    x, samples = x.to(device), [s.to(device) for s in samples]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def fn():
        opt.zero_grad(set_to_none=True)
        with precision(dtype, device):
            loss, _ = model.parse_losses(model.loss(x, samples))
        loss.backward()
        opt.step()
    return fn


def bench_seg(args, device):
    from benchmark import seg_gflop
    from zoo.cpu import PeakMemory
    rows = []
    for head in args.seg_heads:
        for res in args.seg_sizes:
            gflop = {}
            for mode in args.seg_modes:
                for dtype in args.dtypes:
                    variants, peak = {}, {}
                    for mixer in args.seg_mixers:
                        if mixer == "ff" and mode == "train" and res != args.seg_crop:
                            continue  # ff's token count is fixed: it trains at its crop only
                        try:
                            with PeakMemory(device) as mem:
                                model = seg_model(args, mixer, head, device)
                                fn = seg_step(args, model, mode, res, dtype, device)
                                fn()
                        except torch.OutOfMemoryError as e:
                            rows.append(dict(head=head, px=res, mode=mode, dtype=dtype, mixer=mixer,
                                             note=f"out of memory: {str(e).splitlines()[0]}"))
                            print(f"  {head:9s} {res:4d}px {mode:5s} {dtype:4s} {mixer:4s} out of memory", flush=True)
                            model = fn = None
                            free(device)
                            continue
                        variants[mixer], peak[mixer] = fn, mem.mb
                        if mode == "infer" and dtype == args.dtypes[0] and mixer != "ff":
                            gflop[mixer] = seg_gflop(model, res)
                    times = interleaved(variants, args.rounds, device, warmup=1)
                    med = {k: statistics.median(v) for k, v in times.items()}
                    for mixer, t in med.items():
                        row = dict(head=head, px=res, tokens=(res // 16) ** 2, mode=mode, dtype=dtype, mixer=mixer,
                                   ms=round(t * 1e3, 3), peak_mb=peak[mixer], rounds=args.rounds)
                        if "sa" in med:
                            row["x_sa"] = round(med["sa"] / t, 2)
                        if mode == "infer" and mixer in gflop:
                            row["gflop"] = float(f"{gflop[mixer]:.4g}")
                            row["tflop_per_s"] = round(gflop[mixer] / t / 1e3, 2)
                        rows.append(row)
                        print(f"  {head:9s} {res:4d}px {mode:5s} {dtype:4s} {mixer:4s} {t * 1e3:9.2f} ms"
                              f"  peak {peak[mixer]} MB" + (f"  {row['x_sa']:.2f}x sa" if "x_sa" in row else ""),
                              flush=True)
                    del variants
                    model = fn = None
                    free(device)
    return rows


# -- output ---------------------------------------------------------------------------------------------------------
def table(rows, cols):
    rows = [r for r in rows if any(c in r for c in cols)]
    if not rows:
        return ""
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke run)")
    p.add_argument("--only", default="cls,seg", help="comma-separated sections: cls, seg")
    p.add_argument("--quick", action="store_true", help="2 rounds, no GEMM ceilings")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds per table (default 10, quick 2)")
    p.add_argument("--dtypes", default="fp32,bf16", help="fp32 and/or bf16 (autocast)")
    p.add_argument("--cls-batches", type=int, nargs="+", default=[8, 128])
    p.add_argument("--cls-models", nargs="+", default=[f"{m}_vit_{s}" for s in ("small", "base") for m in MIXERS])
    p.add_argument("--seg-sizes", type=int, nargs="+", default=[512, 1024, 2048])
    p.add_argument("--seg-heads", default="segformer,uper", help="decode heads: segformer (light), uper")
    p.add_argument("--seg-mixers", default="sa,ea,effa,ff")
    p.add_argument("--seg-modes", default="infer,train", help="infer (image -> label map) and/or train (one step)")
    p.add_argument("--seg-crop", type=int, default=512, help="the segmentor's crop (its img_size)")
    p.add_argument("--seg-classes", type=int, default=150)
    p.add_argument("--seg-train-batch", type=int, default=2)
    p.add_argument("--seg-model-size", default="tiny")
    p.add_argument("--out", default=os.path.join(REPO, "bench_out"), help="folder for benchmark_gpu.json")
    args = p.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    if set(args.dtypes) - {"fp32", "bf16"}:
        p.error(f"--dtypes: unknown {sorted(set(args.dtypes) - {'fp32', 'bf16'})}; choose from fp32, bf16")
    if set(args.only.split(",")) - {"cls", "seg"}:
        p.error(f"--only: unknown {sorted(set(args.only.split(',')) - {'cls', 'seg'})}; choose from cls, seg")
    args.seg_heads = [h for h in args.seg_heads.split(",") if h]
    args.seg_mixers = [m for m in args.seg_mixers.split(",") if m]
    args.seg_modes = [m for m in args.seg_modes.split(",") if m]
    if set(args.seg_modes) - {"infer", "train"}:
        p.error(f"--seg-modes: unknown {sorted(set(args.seg_modes) - {'infer', 'train'})}; choose from infer, train")
    args.cls_families = [f for f in ("small", "base") if any(n.endswith(f"_vit_{f}") for n in args.cls_models)]
    return args


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("benchmark_gpu: no CUDA device here (torch.cuda.is_available() is False); --device cpu runs the "
                 "same rows on the CPU as a smoke run, and tools/benchmark.py is the CPU benchmark")
    res = dict(meta=dict(machine(device), utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                         command=" ".join(["tools/benchmark_gpu.py"] + sys.argv[1:])))
    print(f"benchmark_gpu: {json.dumps(res['meta'])}", flush=True)
    if device.type == "cuda" and not args.quick:
        res["meta"]["gemm_tflop_per_s"] = {"bf16": gemm_ceiling(device, 8192, torch.bfloat16, 10),
                                           "fp32": gemm_ceiling(device, 8192, torch.float32, 5)}
        print(f"  8192^3 matrix product: {res['meta']['gemm_tflop_per_s']} TFLOP/s", flush=True)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "benchmark_gpu.json")
    for section, measure in (("cls", bench_cls), ("seg", bench_seg)):
        if section in args.only.split(","):
            print(f"{section}:", flush=True)
            res[section] = measure(args, device)
            with open(path, "w") as f:  # after each section, so a later failure keeps what was measured
                json.dump(res, f, indent=1)
    print(f"\n{json.dumps(res['meta'])}\n")
    if res.get("cls"):
        print("### Classifiers, 224 px (x timm = timm's ms / this ms)\n")
        print(table(res["cls"], ["model", "impl", "dtype", "batch", "ms", "images_per_s", "x_timm",
                                 "x_timm_per_round"]) + "\n")
    for head in args.seg_heads:
        rows = [r for r in res.get("seg", []) if r["head"] == head]
        if rows:
            print(f"### Seg end to end, {head}, *_vit_{args.seg_model_size} (x sa = sa's ms / this ms)\n")
            print(table(rows, ["px", "mode", "dtype", "mixer", "ms", "x_sa", "peak_mb", "gflop", "tflop_per_s",
                               "note"]) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
