"""What the walk spreads: the segmentor's probabilities at temperature T (softmax(logits / T)), or its log-probabilities
(a geometric mean along the walk instead of an arithmetic one). docs/seg_scenes_study.md, "The walk as a Chebyshev
series, shipped with the segmentor". Chosen on the tuning scenes (40,000-40,499 of make scenes80k), then scored on
the validation scenes; needs the head of work_dirs/affinity/sa_3k_10k (chebyshev_walk.py says how it was made).
Run from the repository root: .venv/bin/python results/seg_ablation/shift8/affinity/probes/walk_temperature.py"""
import torch

import tasks.seg  # noqa: F401
import zoo
from tasks.seg import affinity as A
from zoo.layers.affinity import name_items, random_walk

torch.set_num_threads(1)
seg = zoo.load("sa_vit_micro.seg_scenes")
fr = A._Frozen(seg)
head = A.AffinityHead(fr.channels)
head.load_state_dict(torch.load("work_dirs/affinity/sa_3k_10k/affinity_head.pt", weights_only=True))
head.eval()


def logits_and_affinities(x):
    out, affs = [], []
    with torch.no_grad():
        for i in range(0, len(x), 50):
            logits = fr.model(x[i:i + 50]).float()
            affs.append(head(x[i:i + 50], fr._feats).sigmoid())
            out.append(logits)
    return torch.cat(out), torch.cat(affs)


def labels(logits, affs, mode, beta=32, steps=800):
    out = []
    for i in range(0, len(logits), 100):
        z, a = logits[i:i + 100], affs[i:i + 100]
        own = z.argmax(1)
        mask = own != 0
        v = z.log_softmax(1) if mode == "log" else (z / mode).softmax(1)
        out.append(name_items(random_walk(v, a, mask, beta, steps, tol=1e-5), own, mask))
    return torch.cat(out)


sets = {"tuning": A._load("data/fashion_scenes80k", "training", seg, 40000, 500),
        "validation": A._load("data/fashion_scenes", "validation", seg)}
modes = (0.5, 1, 2, 4, "log")
for name, (x, y) in sets.items():
    z, a = logits_and_affinities(x)
    row = {m: A.score(y.numpy(), labels(z, a, m).numpy())["mIoU"] for m in modes}
    print(name, "segmentor alone", round(A.score(y.numpy(), z.argmax(1).numpy())["mIoU"], 2),
          {f"T={m}" if m != "log" else "log-probs": round(v, 2) for m, v in row.items()}, flush=True)
