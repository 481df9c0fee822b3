"""The walk of 800 steps against its Chebyshev series (docs/seg_scenes_study.md, "The walk as a Chebyshev series,
shipped with the segmentor"): labels and mIoU of both on the 500 validation scenes, and the cost of each against the
segmentor's on 50 of them (one thread, medians of 5 rounds in one run). Needs the head of work_dirs/affinity/sa_3k_10k
(`python -m tasks.seg.affinity sa_vit_micro.seg_scenes --out work_dirs/affinity/sa_3k_10k --train-data
data/fashion_scenes80k --save-refined work_dirs/affinity/sa_3k_10k_refined`).
Run from the repository root: .venv/bin/python results/seg_ablation/shift8/affinity/probes/chebyshev_walk.py"""
import json
import platform
import statistics
import time

import torch

import tasks.seg  # noqa: F401
import zoo
from tasks.seg import affinity as A
from zoo.layers.affinity import chebyshev_power

torch.set_num_threads(1)
rec = json.load(open("work_dirs/affinity/sa_3k_10k/record.json"))
beta, steps = rec["chosen"]["beta"], rec["chosen"]["steps"]
seg = zoo.load("sa_vit_micro.seg_scenes")
fr = A._Frozen(seg)
head = A.AffinityHead(fr.channels)
head.load_state_dict(torch.load("work_dirs/affinity/sa_3k_10k/affinity_head.pt", weights_only=True))
head.eval()
x, y = A._load("data/fashion_scenes", "validation", seg)
probs, affs = A.predict(fr, head, x)
exact = torch.cat([A.walked_labels(probs[i:i + 100], affs[i:i + 100], beta, steps) for i in range(0, 500, 100)])
print(f"beta {beta}, {steps} steps; segmentor alone mIoU {A.score(y.numpy(), probs.argmax(1).numpy())['mIoU']:.2f}")
print(f"step by step: mIoU {A.score(y.numpy(), exact.numpy())['mIoU']:.2f}")
for tol in (1e-4, 1e-5, 1e-6):
    series = torch.cat([A.walked_labels(probs[i:i + 100], affs[i:i + 100], beta, steps, tol=tol)
                        for i in range(0, 500, 100)])
    print(f"series, tol {tol:g} ({len(chebyshev_power(steps, tol)) - 1} terms): mIoU "
          f"{A.score(y.numpy(), series.numpy())['mIoU']:.2f}, {int((series != exact).sum())} of {exact.numel()} "
          f"pixels labelled otherwise than step by step")
t = {"segmentor": [], "affinity head": [], f"walk, {steps} steps": [], "walk, series tol 1e-5": []}
xs = x[:50]
for r in range(5):
    t0 = time.perf_counter()
    p, f = fr(xs)
    t1 = time.perf_counter()
    with torch.no_grad():
        a = head(xs, f).sigmoid()
    t2 = time.perf_counter()
    A.walked_labels(p, a, beta, steps)
    t3 = time.perf_counter()
    A.walked_labels(p, a, beta, steps, tol=1e-5)
    t4 = time.perf_counter()
    for k, v in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
        t[k].append(v)
for k, v in t.items():
    print(f"{k}: median {statistics.median(v):.3f} s per 50 scenes, "
          f"{statistics.median(v) / statistics.median(t['segmentor']):.2f}x the segmentor")
print(torch.__version__, torch.backends.cpu.get_cpu_capability(), platform.processor() or "")
