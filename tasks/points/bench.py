"""Point-cloud throughput per mixer, for ``tools/benchmark.py``: ``run(quick) -> list of table rows``.

For every mixer, ``pcls`` and ``pseg`` models at 1024 and 2048 points (grouping stages N/2 and N/4, k = 32):
shapes/s of inference (eval mode, no gradients), the time of the tokenizer, and the time of the grouping step
alone (farthest point sampling + kNN + gather of both stages, no MLPs), and the row's own peak memory
(``zoo.cpu.PeakMemory``: what building and running that model added, not the process maximum). ``profile_grouping``
prints the torch.profiler table of the grouping step.

    python -m tasks.points.bench            # quick: micro models, batch 8, one timed batch
"""
import time

import torch

import zoo
from zoo.cpu import PeakMemory
from zoo.layers import points as P
from zoo.mixers import MIXERS

POINTS = (1024, 2048)


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def _timed(fn, reps, device):
    fn()  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / reps


def grouping(xyz, stages=None, k=32):
    """The grouping step of the tokenizer without its MLPs: per stage FPS, kNN, gather. Returns the centres."""
    stages = stages or (xyz.shape[1] // 2, xyz.shape[1] // 4)
    xyz = P.index_points(xyz, P.lexsort(xyz))
    for m in stages:
        idx = P.farthest_point_sample(xyz, m, canonical=True)
        centres = P.index_points(xyz, idx)
        P.index_points(xyz, P.knn(centres, xyz, k, canonical=True))  # grouped (B, M, k, 3)
        xyz = centres
    return xyz


@torch.no_grad()
def run(quick=True, mixers=tuple(MIXERS), points=POINTS):
    """Rows for every mixer x task x point count.

    Args:
        quick: micro models, batch 8, one timed batch; otherwise tiny models, batch 32, three timed batches.
        mixers: Mixer codes.
        points: Points per cloud.
    """
    device = "cuda" if torch.cuda.is_available() else "cpu"
    size, batch, reps = ("micro", 8, 1) if quick else ("tiny", 32, 3)
    rows = []
    for n in points:
        x = torch.rand(batch, n, 3, device=device) * 2 - 1
        cat = torch.arange(batch, device=device) % 16
        t_group = _timed(lambda: grouping(x), reps, device)
        for mixer in mixers:
            for task in ("pcls", "pseg"):
                name = f"{mixer}_vit_{size}"
                with PeakMemory(device) as mem:
                    model = zoo.load(name, task=task, num_points=n).to(device).eval()
                    dt = _timed((lambda: model(x)) if task == "pcls" else (lambda: model(x, cat)), reps, device)
                t_tok = _timed(lambda: model.tokenizer(x), reps, device)
                rows.append({"task": task, "model": name, "input": f"{n} points, batch {batch}", "device": device,
                             "tokens": model.num_tokens, "shapes/s": round(batch / dt, 1),
                             "tokenizer ms": round(1000 * t_tok, 1), "grouping ms": round(1000 * t_group, 1),
                             "peak MB": mem.mb})
                del model
    return rows


def profile_grouping(batch=32, n=1024, k=32, device=None, rows=12):
    """Profile the grouping step (``grouping``) with torch.profiler; returns the table sorted by self time."""
    from torch.profiler import ProfilerActivity, profile
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    x = torch.rand(batch, n, 3, device=device)
    grouping(x, k=k)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with torch.no_grad(), profile(activities=acts) as prof:
        grouping(x, k=k)
        _sync(device)
    key = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows)


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
