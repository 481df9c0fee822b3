"""``zoo.preprocess`` for classifiers against timm's eval transform, in an environment that has timm and torchvision.

    /work/timm-venv/bin/python tools/check_timm_transform.py

It loads ``zoo/data.py`` alone (it needs torch, numpy and Pillow only, none of the zoo's other dependencies), builds
timm's ``create_transform(**resolve_data_config({}, model=deit_base_patch16_224))`` and feeds both the same images
at several sizes, given to the zoo as PIL images and uint8 arrays (both resized by PIL, as timm does) and as uint8
CHW tensors (resized by ``F.interpolate``). It prints the largest difference in grey levels (0..255) per image and
exits non-zero if the PIL or array path differs by more than 0.01 grey levels or the tensor path by more than 2 (README.md, "Use", has the measured
values).
"""
import importlib.util
import os
import sys

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = ((300, 400), (500, 375), (224, 224), (256, 256), (333, 517), (180, 200))


def main():
    import timm
    from timm.data import create_transform, resolve_data_config
    spec = importlib.util.spec_from_file_location("zoo_data", os.path.join(HERE, "..", "zoo", "data.py"))
    data = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(data)
    tcfg = resolve_data_config({}, model=timm.create_model("deit_base_patch16_224", pretrained=False))
    transform = create_transform(**tcfg)
    ours = dict(task="cls", input_size=tuple(tcfg["input_size"]), mean=tuple(tcfg["mean"]), std=tuple(tcfg["std"]),
                interpolation=tcfg["interpolation"], crop_pct=tcfg["crop_pct"])
    print(f"timm {timm.__version__}, torch {torch.__version__}: {tcfg}")
    std = torch.tensor(tcfg["std"]).view(3, 1, 1)
    rng = np.random.default_rng(0)
    worst = {"PIL": 0.0, "array": 0.0, "tensor": 0.0}
    for h, w in SIZES:
        coarse = rng.integers(0, 256, size=(h // 8 + 1, w // 8 + 1, 3), dtype=np.uint8)  # smooth, image-like content
        arr = np.array(Image.fromarray(coarse).resize((w, h), Image.BILINEAR))  # a writable copy
        ref = transform(Image.fromarray(arr))
        diffs = {}
        inputs = (("PIL", Image.fromarray(arr)), ("array", arr), ("tensor", torch.from_numpy(arr).permute(2, 0, 1)))
        for name, img in inputs:
            diffs[name] = float(((data.preprocess(img, ours)[0] - ref).abs() * std).max()) * 255
            worst[name] = max(worst[name], diffs[name])
        print(f"  {h}x{w}: max |zoo - timm| PIL {diffs['PIL']:.3f}, uint8 array {diffs['array']:.3f}, uint8 tensor "
              f"{diffs['tensor']:.3f} grey levels")
    ok = worst["PIL"] <= 0.01 and worst["array"] <= 0.01 and worst["tensor"] <= 2.0
    print("PASS" if ok else "FAIL", f"(worst: PIL {worst['PIL']:.3f}, array {worst['array']:.3f}, tensor "
                                    f"{worst['tensor']:.3f})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
