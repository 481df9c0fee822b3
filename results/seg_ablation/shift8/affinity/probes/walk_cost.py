"""The walk's cost against the segmentor's (docs/seg_scenes_study.md, "Items named as a whole"): 50 validation scenes,
one thread, medians of 5 rounds; needs the head of work_dirs/affinity/sa_8k_40k (its record's command).
Run from the repository root: .venv/bin/python results/seg_ablation/shift8/affinity/probes/walk_cost.py"""
import time, statistics, torch
torch.set_num_threads(1)
import tasks.seg  # noqa
from tasks.seg import affinity as A
import zoo
seg = zoo.load("sa_vit_micro.seg_scenes")
fr = A._Frozen(seg)
head = A.AffinityHead(fr.channels); head.load_state_dict(torch.load("work_dirs/affinity/sa_8k_40k/affinity_head.pt", weights_only=True)); head.eval()
x, _ = A._load("data/fashion_scenes", "validation", seg, 0, 50)
t = {"segmentor": [], "affinity head": [], "walk 800 steps": [], "walk 400 steps, radius 2 (6 offsets)": []}
offs2 = A.offsets_within(2)
a2 = torch.rand(50, 6, 64, 64)
for r in range(5):
    t0 = time.perf_counter(); p, f = fr(x); t1 = time.perf_counter()
    with torch.no_grad(): a = head(x, f).sigmoid()
    t2 = time.perf_counter(); A.walked_labels(p, a, 32, 800); t3 = time.perf_counter()
    A.walked_labels(p, a2, 32, 400, offsets=offs2); t4 = time.perf_counter()
    for k, v in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)): t[k].append(v)
for k, v in t.items(): print(f"{k}: median {statistics.median(v):.3f} s per 50 scenes, {statistics.median(v)/statistics.median(t['segmentor']):.2f}x the segmentor")
print(torch.__version__, torch.backends.cpu.get_cpu_capability())
