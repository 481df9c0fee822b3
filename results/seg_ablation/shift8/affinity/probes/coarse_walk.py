"""The walk on the 2x2-pooled grid, on the 500 tuning scenes (docs/seg_scenes_study.md, "Items named as a whole");
needs the head of work_dirs/affinity/sa_8k_40k. Run from the repository root:
.venv/bin/python results/seg_ablation/shift8/affinity/probes/coarse_walk.py"""
import time, torch, torch.nn.functional as F
torch.set_num_threads(1)
import tasks.seg  # noqa
from tasks.seg import affinity as A
import zoo
seg = zoo.load("sa_vit_micro.seg_scenes")
fr = A._Frozen(seg)
head = A.AffinityHead(fr.channels); head.load_state_dict(torch.load("work_dirs/affinity/sa_8k_40k/affinity_head.pt", weights_only=True)); head.eval()
x, y = A._load("data/fashion_scenes80k", "training", seg, 40000, 500)
p, a = A.predict(fr, head, x)
def sc(l): return round(A.score(y.numpy(), l.numpy())["mIoU"], 2)
print("segmentor", sc(p.argmax(1)), flush=True)
# coarse grid: 2x2 mean of probs; the affinity of coarse neighbours = product of the two fine steps between them
pc = F.avg_pool2d(p, 2)
ar = a[:, 0, ::2, ::2] * a[:, 0, ::2, 1::2]
ad = a[:, 1, ::2, ::2] * a[:, 1, 1::2, ::2]
ac = torch.stack([ar, ad], 1)
fine_mask = p.argmax(1) != 0
cmask = F.max_pool2d(fine_mask[:, None].float(), 2)[:, 0] > 0
for beta in (8, 16, 32):
    for steps in (100, 200, 400):
        t0 = time.perf_counter()
        w = A.random_walk(pc, ac, cmask, beta, steps)
        w = F.interpolate(w, scale_factor=2, mode="bilinear", align_corners=False)
        dt = time.perf_counter() - t0
        w[:, 0] = -1
        lab = torch.where(fine_mask, w.argmax(1), p.argmax(1))
        print(beta, steps, sc(lab), f"{dt:.2f}s per 500", flush=True)
