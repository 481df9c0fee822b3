"""The FID floor of an evaluation split: the FID between its two disjoint halves (even- and odd-indexed images).

It also computes (or reads) the cached real features that ``GenMetric`` uses for that split, so running it once
before evaluating several checkpoints takes the one-off cost out of the first evaluation::

    OMP_NUM_THREADS=1 python -m tasks.gen.floor --feature-net inception-v3      # Fashion-MNIST t10k, 32x32
    python -m tasks.gen.floor --dataset cifar10 --data-root data/cifar10 --feature-net fmnist-clf

Prints one JSON line: the feature network, split, number of images, ``FID_floor``, the cache file and the seconds.
"""
import argparse
import json
import sys
import time

from .datasets import FMNIST_ROOT, CIFAR10Batches, FashionMNIST32
from .metrics import GenMetric, real_halves_fid


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=["fmnist", "cifar10"], default="fmnist")
    ap.add_argument("--data-root", default=None, help=f"default: {FMNIST_ROOT} (fmnist), data/cifar10 (cifar10)")
    ap.add_argument("--split", choices=["train", "test"], default="test")
    ap.add_argument("--max-samples", type=int, default=None, help="first n images only (default: the whole split)")
    ap.add_argument("--feature-net", default="inception-v3", help="fmnist-clf or inception-v3")
    ap.add_argument("--weights", default=None, help="weights file of the feature network (default: its own)")
    args = ap.parse_args(argv)
    if args.dataset == "fmnist":
        ds = FashionMNIST32(args.data_root or FMNIST_ROOT, split=args.split, max_samples=args.max_samples)
    else:
        ds = CIFAR10Batches(args.data_root or "data/cifar10", split=args.split, max_samples=args.max_samples)
    spec = dict(type=args.feature_net) if args.weights is None else dict(type=args.feature_net, weights=args.weights)
    metric = GenMetric(feature_net=spec, scores=("FID",))
    metric.dataset_meta = ds.metainfo
    t0 = time.time()
    feats, _ = metric.reference_features(ds.images)
    t1 = time.time()
    out = dict(feature_net=metric.net_name, split=ds.metainfo["split"], num_images=len(ds),
               resolution="x".join(map(str, ds.images.shape[2:])), FID_floor=round(real_halves_fid(feats), 4),
               cache=metric.reference_path, feature_seconds=round(t1 - t0, 1),
               floor_seconds=round(time.time() - t1, 1))
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    sys.exit(main() and 0)
