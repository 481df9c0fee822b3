"""Convert a foreign checkpoint (timm / DeiT ViT, FF-only, mmseg UPerNet + ViT, EANet EAMLP, or zoo) into a zoo folder.

    python tools/convert.py deit_small_patch16_224.pth --to sa_vit_small --out converted/sa_vit_small
    python tools/convert.py linear-tiny-checkpoint.pth --to ff_vit_tiny --out converted/ff_vit_tiny
    python tools/convert.py in1k.pth --to sa_vit_small --num-classes 10 --drop-head --out ft_init/
    python tools/convert.py upernet_deit-s16_mln_512x512_160k_ade20k_20210621_161021-fb9a5dfb.pth --to sa_vit_small \
        --task seg --num-classes 150 --img-size 512 --set padded_logits=stretch --out converted/sa_vit_small_ade20k
    python tools/convert.py model_best.pth.tar --key state_dict_ema --to ea_t2t_7 --img-size 384 --out converted/eamlp7

Writes ``OUT/model.safetensors`` (keys exactly the zoo model's ``state_dict()``), plus ``config.json`` and a
model card through ``zoo.save_pretrained`` when ``zoo.hub`` is present. Layouts and options: ``zoo/convert.py``.
"""
import argparse
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import zoo  # noqa: E402
from zoo import convert  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("src", help="source checkpoint (.pth/.pt/.bin read with weights_only=True, or .safetensors)")
    p.add_argument("--to", required=True, help="zoo model name, e.g. sa_vit_small, ff_vit_tiny")
    p.add_argument("--out", required=True, help="output folder (model.safetensors is written inside)")
    p.add_argument("--task", default="cls", help="task of the target model (default cls)")
    p.add_argument("--num-classes", type=int, default=1000, help="classes of the target head (default 1000)")
    p.add_argument("--img-size", type=int, default=224, help="input size of the target (position embeddings are "
                   "resampled to its grid; ff models need the checkpoint's size)")
    p.add_argument("--patch-size", type=int, default=16)
    p.add_argument("--drop-head", action="store_true", help="keep a fresh head when the checkpoint's head has "
                   "another size (e.g. 1000-class weights for --num-classes 10)")
    p.add_argument("--drop-distillation", action="store_true", help="accept a distilled DeiT checkpoint by "
                   "dropping its distillation token and head_dist")
    p.add_argument("--key", default=None, help="entry of the checkpoint dict holding the weights, e.g. state_dict_ema "
                   "(EAMLP's released file); default model / state_dict / model_ema / the dict itself")
    p.add_argument("--layout", default=None, choices=sorted(convert.CONVERTERS),
                   help="refuse the file unless it is in this layout (default: recognised from its keys)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="further architecture argument of the target, VALUE read as JSON when it parses (e.g. "
                   "final_norm=true, padded_logits=stretch, channels=512); repeatable")
    p.add_argument("--force", action="store_true", help="overwrite an existing output")
    return p.parse_args(argv)


def parse_sets(items):
    """``["a=1", "b=stretch"]`` -> ``{"a": 1, "b": "stretch"}`` (JSON values where they parse, else strings)."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"error: --set expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:  # a bare word such as stretch is meant as a string
            out[key] = value
    return out


def main(argv=None):
    args = parse_args(argv)
    weights = os.path.join(args.out, "model.safetensors")
    if os.path.exists(weights) and not args.force:
        sys.exit(f"error: {weights} exists; pass --force to overwrite it")
    model = zoo.load(args.to, task=args.task, num_classes=args.num_classes, img_size=args.img_size,
                     patch_size=args.patch_size, **parse_sets(args.set))
    layout = convert.detect_layout(convert.read_state_dict(args.src, key=args.key))
    convert.load_checkpoint(model, args.src, drop_head=args.drop_head, drop_distillation=args.drop_distillation,
                            layout=args.layout, key=args.key)
    os.makedirs(args.out, exist_ok=True)
    if importlib.util.find_spec("zoo.hub") is not None:
        zoo.save_pretrained(model, args.out, overwrite=args.force)
    else:
        from safetensors.torch import save_file
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, weights,
                  metadata={"format": "pt", "zoo_name": args.to, "source": os.path.basename(args.src)})
    n = sum(v.numel() for v in model.state_dict().values())
    print(f"converted {args.src} ({layout} layout) -> {args.to}: {len(model.state_dict())} tensors, "
          f"{n / 1e6:.2f}M values, written to {args.out}")


if __name__ == "__main__":
    main()
