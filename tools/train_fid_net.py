"""Train the Fashion-MNIST feature classifier behind ``FID(fmnist-clf)`` / ``KID(fmnist-clf)`` / ``IS(fmnist-clf)``.

Reproducible (fixed seed, one thread by default): writes ``tasks/gen/weights/fmnist_clf.safetensors`` and prints
its test accuracy and sha256 (recorded in docs/generation.md)::

    python tools/train_fid_net.py [--epochs 3] [--out tasks/gen/weights/fmnist_clf.safetensors]
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tasks.gen.datasets import FMNIST_ROOT, FashionMNIST32  # noqa: E402
from tasks.gen.feature_nets import FMNIST_CLF_WEIGHTS, FashionMNISTClassifier, sha256_of  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-root", default=FMNIST_ROOT)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=FMNIST_CLF_WEIGHTS)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    train = FashionMNIST32(args.data_root, "train")
    test = FashionMNIST32(args.data_root, "test")
    x_train = train.images.float() / 127.5 - 1.0  # (60000, 1, 32, 32) in [-1, 1], as the GAN's images
    x_test = test.images.float() / 127.5 - 1.0
    net = FashionMNISTClassifier()
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-4)
    steps = args.epochs * (len(x_train) // args.batch_size)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps)
    t0 = time.time()
    for epoch in range(args.epochs):
        net.train()
        order = torch.from_numpy(rng.permutation(len(x_train)))
        for b in range(len(x_train) // args.batch_size):
            idx = order[b * args.batch_size:(b + 1) * args.batch_size]
            x, y = x_train[idx], train.labels[idx]
            # augmentation: horizontal flip and +-2 px shift (the padded border makes shifts cheap and realistic)
            flip = torch.rand(len(x)) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)
            dx, dy = rng.integers(-2, 3, size=2)
            x = torch.roll(x, shifts=(int(dy), int(dx)), dims=(2, 3))
            loss = F.cross_entropy(net(x)[1], y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        net.eval()
        with torch.no_grad():
            pred = torch.cat([net(xb)[1].argmax(1) for xb in x_test.split(1000)])
        acc = (pred == test.labels).float().mean().item()
        print(f"epoch {epoch + 1}/{args.epochs}: loss {loss.item():.3f}, test top-1 {acc * 100:.2f}% "
              f"({time.time() - t0:.0f} s)", flush=True)
    from safetensors.torch import save_file
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, args.out,
              metadata=dict(name="fmnist-clf", test_top1=f"{acc:.4f}", epochs=str(args.epochs), seed=str(args.seed)))
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.2f} MB), sha256 {sha256_of(args.out)}, "
          f"test top-1 {acc * 100:.2f}%")


if __name__ == "__main__":
    main()
