"""Segmentation throughput and peak memory per mixer, for ``tools/benchmark.py``: ``run(quick) -> table rows``.

UPerNet over the ``small`` trunk (384 wide, 12 blocks, 512-channel UPerHead, 150 classes), inference (eval mode,
no gradients) on one image at 512x512 and 1024x1024. Non-``ff`` models run the whole image (position embeddings
resampled at 1024); ``ff`` models have a fixed token count and slide their 512 window (stride 341, 9 windows at
1024), exactly as their configs test.

Peak memory: on CUDA, ``torch.cuda.max_memory_allocated`` around the timed calls; on CPU, each (mixer, size) runs in
a fresh subprocess and reports its peak resident set size (``ru_maxrss``: weights, activations and the Python /
mmseg runtime, about 0.5 GB of it), since CPU allocations cannot be reset and measured in-process.

    python -m tasks.seg.bench            # quick: one timed image per row
"""
import json
import subprocess
import sys
import time

import torch

MIXERS = ("sa", "ea", "effa", "ff")
SIZES = (512, 1024)


def measure(mixer, res, reps=1, warmup=0, device=None):
    """One table row: images/s and peak memory of ``{mixer}_vit_small`` UPerNet at ``res`` x ``res``."""
    import zoo
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    name = f"{mixer}_vit_small"
    model = zoo.load(name, task="seg", num_classes=150, img_size=512).to(device).eval()
    x = torch.randn(1, 3, res, res, device=device)
    with torch.no_grad():
        for _ in range(warmup):
            model(x)
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(reps):
            out = model(x)
        if device == "cuda":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    assert out.shape == (1, 150, res, res)
    if device == "cuda":
        peak, how = torch.cuda.max_memory_allocated() / 2 ** 20, "CUDA max allocated"
    else:
        import resource
        peak, how = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process peak RSS"  # KiB -> MiB
    return {"task": "seg", "model": f"upernet {name}", "input": f"3x{res}x{res}, batch 1",
            "inference": model.test_cfg.mode, "device": device, "threads": torch.get_num_threads(),
            "images/s": round(reps / dt, 3), "peak MB": round(peak, 1), "memory": how}


def run(quick=True, sizes=SIZES, mixers=MIXERS):
    """Rows for every mixer x input size.

    Args:
        quick: one timed image per row without warm-up (CPU friendly); otherwise one warm-up and 3 timed images.
        sizes: Input sides.
        mixers: Mixer codes.
    """
    reps, warmup = (1, 0) if quick else (3, 1)
    rows = []
    for mixer in mixers:
        for res in sizes:
            if torch.cuda.is_available():
                rows.append(measure(mixer, res, reps=reps, warmup=warmup))
                continue
            # CPU: a fresh process per row, so its peak RSS belongs to this row alone
            code = (f"import json; from tasks.seg.bench import measure; "
                    f"print(json.dumps(measure({mixer!r}, {res}, reps={reps}, warmup={warmup})))")
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"seg benchmark {mixer} {res}x{res} failed:\n{proc.stderr[-3000:]}")
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
