"""Write a PNG grid of GAN samples (EMA generator): ``python tools/sample.py CONFIG CHECKPOINT --out grid.png``.

Or from a zoo model (random weights unless ``--checkpoint`` or a pretrained tag / published folder is given)::

    python tools/sample.py --model ea_vit_micro --img-size 32 --out-chans 1 [--checkpoint model.safetensors]

``--checkpoint`` takes a zoo safetensors file or a checkpoint ``tools/train.py`` wrote (``work_dir/iter_N.pth``:
the GAN's weights are taken from it by ``zoo.load``; the architecture flags must match the training config).

``--seed`` makes the grid reproducible (the same seed draws the same latents on any machine).
"""
import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))  # the repo root, for a checkout without install

import torch  # noqa: E402


def image_grid(images, nrow=8, pad=2):
    """Images (N, C, H, W) in [-1, 1] -> one uint8 array (rows*H', cols*W', C) with ``pad`` px white borders."""
    n, c, h, w = images.shape
    ncol = min(nrow, n)
    nrows = (n + ncol - 1) // ncol
    x = ((images.clamp(-1, 1) + 1) * 127.5).round().to(torch.uint8)
    grid = torch.full((c, nrows * (h + pad) + pad, ncol * (w + pad) + pad), 255, dtype=torch.uint8)
    for i in range(n):
        r, k = divmod(i, ncol)
        grid[:, pad + r * (h + pad):pad + r * (h + pad) + h, pad + k * (w + pad):pad + k * (w + pad) + w] = x[i]
    return grid.permute(1, 2, 0).numpy()  # (H, W, C)


def save_png(array, path):
    """Save an (H, W, 1|3) uint8 array as PNG."""
    from PIL import Image
    os.makedirs(osp.dirname(osp.abspath(path)) or ".", exist_ok=True)
    img = Image.fromarray(array[..., 0] if array.shape[-1] == 1 else array, mode="L" if array.shape[-1] == 1 else "RGB")
    img.save(path)


def load_gan(args):
    """The zoo GAN from a config + mmengine checkpoint, or from ``zoo.load``."""
    if args.config:
        from mmengine.config import Config
        from mmengine.registry import MODELS
        from mmengine.runner.checkpoint import load_checkpoint

        import tasks.common  # noqa: F401  (safe checkpoint loader)
        import tasks.gen  # noqa: F401  (registers GANModel)
        cfg = Config.fromfile(args.config)
        if args.cfg_options:
            cfg.merge_from_dict(args.cfg_options)
        model = MODELS.build(cfg.model)
        if args.checkpoint_pos:
            load_checkpoint(model, args.checkpoint_pos, map_location="cpu", strict=True)
        return model.zoo_model
    import zoo
    try:
        return zoo.load(args.model, task="gen", checkpoint=args.checkpoint, img_size=args.img_size,
                        out_chans=args.out_chans, z_dim=args.z_dim)
    except (zoo.CheckpointError, FileNotFoundError) as e:
        raise SystemExit(f"tools/sample.py: error: {e}") from None


def _dict_action():
    from mmengine.config import DictAction
    return DictAction


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", help="a gen config (with CHECKPOINT from tools/train.py)")
    ap.add_argument("checkpoint_pos", nargs="?", metavar="CHECKPOINT", help="mmengine checkpoint of that config")
    ap.add_argument("--model", help="zoo name, pretrained tag or published folder (instead of CONFIG)")
    ap.add_argument("--checkpoint", help="weights file for --model (safetensors, or a tools/train.py checkpoint)")
    ap.add_argument("--img-size", type=int, default=32)
    ap.add_argument("--out-chans", type=int, default=3)
    ap.add_argument("--z-dim", type=int, default=128)
    ap.add_argument("--n", type=int, default=64, help="number of samples")
    ap.add_argument("--nrow", type=int, default=8, help="images per row")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="samples.png")
    ap.add_argument("--cfg-options", nargs="+", action=_dict_action(), help="override config entries (model.z_dim=64)")
    args = ap.parse_args(argv)
    if not args.config and not args.model:
        ap.error("give CONFIG [CHECKPOINT] or --model NAME")
    gan = load_gan(args).eval()
    images = gan.sample(args.n, seed=args.seed).cpu()
    save_png(image_grid(images, args.nrow), args.out)
    print(f"wrote {args.out}: {args.n} samples, seed {args.seed}, {tuple(images.shape[1:])} each")
    return images


if __name__ == "__main__":
    main()
