"""Write the validation curve of an unfinished 80,000-scene / 48,000-iteration run from its work dir.

    python results/seg_ablation/shift8/80k_48k/partial_curve.py ea "status line"   # -> ea_curve_partial.json

The curve is tools/make_weights.py's own (the runs' vis_data records joined at the checkpoints they resumed from).
"""
import json
import os.path as osp
import sys

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))))
sys.path.insert(0, osp.join(ROOT, "tools"))
import make_weights  # noqa: E402

RECIPE = "upernet_m-vit-micro-p4_1xb16-48000_fashion-scenes80k-64x64-head4to32-shift8"


def main(mixer, status):
    work = osp.join(ROOT, "work_dirs/recipes", RECIPE, f"{mixer}_vit_micro.seg_scenes")
    curve = make_weights._curve(work)
    val = [[r["step"], round(r["mIoU"], 2)] for r in curve if "mIoU" in r]
    resumed = make_weights._read_json(osp.join(work, "resumed.json"), [])
    rec = dict(mixer=mixer, config=f"configs/seg/upernet_{mixer}-vit-micro-p4_1xb16-48000_fashion-scenes80k-64x64-"
                                    "head4to32-shift8.py",
               status=status, val_curve_iter_mIoU=val, resumed_from=resumed,
               last_train_iter=max(r["iter"] for r in curve if "iter" in r),
               command=f"python tools/make_weights.py --tasks seg --mixers {mixer} --jobs 1 --threads 2 --recipe "
                       "'seg=configs/seg/upernet_{m}-vit-micro-p4_1xb16-48000_fashion-scenes80k-64x64-head4to32-"
                       "shift8.py' (then with --resume; from 2026-12-07 19:51 UTC as --mixers ea sa --jobs 2 "
                       "--threads 1 --resume)",
               note="validation every 500 iterations on the 500 validation scenes")
    out = osp.join(osp.dirname(osp.abspath(__file__)), f"{mixer}_curve_partial.json")
    with open(out, "w") as f:
        json.dump(rec, f, indent=1)
    print(out, val[-3:], rec["last_train_iter"])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
