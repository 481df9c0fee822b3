"""Hard affinity regions and walked class components named by the fragment-trained classifier (region_naming.rename),
on the 500 tuning scenes; needs the head of work_dirs/affinity/sa_8k_40k and the classifier of
"python -m tasks.seg.oracle --classifier sa_vit_micro.cls_fmnist --fragment-epochs 3 --save-fragment-trained
work_dirs/fragtrunk/classifier_sa". Run from the repository root:
.venv/bin/python results/seg_ablation/shift8/affinity/probes/regions_renamed.py data/fashion_scenes80k 40000 500 training"""
import sys, time, torch, numpy as np
torch.set_num_threads(1)
import tasks.seg  # noqa
from tasks.seg import affinity as A, region_naming as R, errors
import zoo
from PIL import Image
seg = zoo.load("sa_vit_micro.seg_scenes")
fr = A._Frozen(seg)
head = A.AffinityHead(fr.channels); head.load_state_dict(torch.load("work_dirs/affinity/sa_8k_40k/affinity_head.pt", weights_only=True)); head.eval()
clf = zoo.load("local-dir:work_dirs/fragtrunk/classifier_sa/own_box").float().eval()
root, first, num = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
split = sys.argv[4]
paths, gts = errors.read_split(root, split, num if num > 0 else None, first)
x, y = A._load(root, split, seg, first, num if num > 0 else None)
pt, at = A.predict(fr, head, x)
images = [np.asarray(Image.open(p).convert("RGB")) for p in paths]
labels = pt.argmax(1)
def sc(maps): return round(A.score(y.numpy(), np.asarray(maps))["mIoU"], 2)
print("segmentor", sc(labels.numpy()), flush=True)
probs = list(pt.numpy())
walked = A.walked_labels(pt, at, 32, 800)
print("walked", sc(walked.numpy()), flush=True)
alphas = (0.0, 1.0, 2.0, 4.0, 8.0, float("inf"))
for t in (0.9, 0.97, 0.99):
    reg = A.region_labels(pt, at, t)  # labels
    ids = A.affinity_regions(at, labels != 0, t).numpy()
    regs = [[ids[n] == r for r in np.unique(ids[n][ids[n] >= 0])] for n in range(len(ids))]
    out = R.rename(list(labels.numpy()), probs, images, regs, clf, alphas)
    print("regions", t, sc(reg.numpy()), {a: sc(m) for a, m in out.items()}, flush=True)
wl = list(walked.numpy())
for g in ("class components", "class components, 2-px gaps joined"):
    regs = [R.regions(l, g) for l in wl]
    out = R.rename(wl, probs, images, regs, clf, alphas)
    print("walked then", g, {a: sc(m) for a, m in out.items()}, flush=True)
