"""Time (and optionally profile) one training step of a segmentation config, without its data or a Runner.

    python tools/seg_step.py CONFIG [--cfg-options ...] [--batch 16] [--steps 20] [--profile]

Builds the config's model and optimiser exactly as ``tools/train.py`` would (the trunk's ``init_cfg`` is dropped:
weights do not change the time), feeds a fixed batch of random images and label maps at the config's crop size,
runs ``--warmup`` steps, then prints the median wall time of ``--steps`` more (``model.train_step``: data
preprocessing, forward, losses, backward, optimiser step). ``--profile`` adds ``torch.profiler``'s table of the
operators with the most self time over 5 further steps. The recipe comparisons of docs/seg_scenes_study.md use it,
e.g.::

    OMP_NUM_THREADS=2 python tools/seg_step.py configs/seg/upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64.py
    OMP_NUM_THREADS=2 python tools/seg_step.py configs/seg/upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64.py \\
        --cfg-options "model.neck.scales=[1,0.5,0.25,0.125]"
"""
import argparse
import json
import os.path as osp
import statistics
import sys
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # the repo root, for a checkout without install

import torch  # noqa: E402
from mmengine.config import Config, DictAction  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Time one training step of a segmentation config on random data")
    p.add_argument("config")
    p.add_argument("--cfg-options", nargs="+", action=DictAction, help="override config entries, as in tools/train.py")
    p.add_argument("--batch", type=int, help="images per step (default: the config's train batch size)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--profile", action="store_true", help="also print torch.profiler's top operators over 5 steps")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def random_batch(n, size, num_classes, seed=0):
    """``n`` random uint8 images (3, H, W) and label maps in [0, num_classes), as mmseg's ``PackSegInputs`` gives."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    g = torch.Generator().manual_seed(seed)
    h, w = size
    inputs, samples = [], []
    for _ in range(n):
        inputs.append(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g))
        s = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w)))
        s.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, h, w), generator=g))
        samples.append(s)
    return dict(inputs=inputs, data_samples=samples)


def build(cfg):
    """The config's model (trunk weights not loaded) and optimiser wrapper, in mmseg's scope."""
    import tasks.seg  # noqa: F401  (what the configs' custom_imports load)
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    cfg.model.backbone.init_cfg = None
    with DefaultScope.overwrite_default_scope("mmseg"):
        model = MODELS.build(cfg.model)
        model.init_weights()
        optim = build_optim_wrapper(model, cfg.optim_wrapper)
    return model.train(), optim


def main(argv=None):
    args = parse_args(argv)
    if args.steps < 1:
        raise SystemExit(f"--steps must be at least 1, got {args.steps}")
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    if not hasattr(cfg, "crop_size"):
        raise SystemExit(f"{args.config} has no crop_size: tools/seg_step.py times segmentation configs only")
    torch.manual_seed(args.seed)
    model, optim = build(cfg)
    batch = random_batch(args.batch or cfg.train_dataloader.batch_size, tuple(cfg.crop_size),
                         model.decode_head.num_classes, args.seed)
    for _ in range(args.warmup):
        model.train_step(batch, optim)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        model.train_step(batch, optim)
        times.append(time.perf_counter() - t0)
    result = dict(config=args.config, cfg_options=args.cfg_options or {}, batch=len(batch["inputs"]),
                  crop_size=list(cfg.crop_size), steps=args.steps, median_step_s=round(statistics.median(times), 4),
                  threads=torch.get_num_threads(), torch=torch.__version__)
    print(json.dumps(result))
    if args.profile:
        from torch.profiler import profile
        with profile() as prof:
            for _ in range(5):
                model.train_step(batch, optim)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    return result


if __name__ == "__main__":
    main()
