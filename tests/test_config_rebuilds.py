"""Every cls, gen, pcls and pseg config's model is what its published folder would rebuild: ``zoo.load`` of the
zoo model's ``zoo_config`` (what ``config.json`` records), holding the same weights, gives the same outputs.

A constructor choice that a config makes and ``zoo_config`` does not record loads from a published folder without a
key mismatch, as another model (the seg configs' neck rescaling once did; ``tests/test_seg_configs.py`` checks the
seg configs the same way). Random weights are enough: the check is of the architecture.
"""
import glob
import os

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(p for task in ("cls", "gen", "pcls", "pseg")
                 for p in glob.glob(os.path.join(ROOT, "configs", task, "*.py")))


def _inputs(task, args):
    g = torch.Generator().manual_seed(0)
    if task in ("pcls", "pseg"):
        points = torch.randn(1, args["num_points"], args.get("in_dims", 3), generator=g)
        return (points,) if task == "pcls" else (points, torch.zeros(1, dtype=torch.long))
    size = args["img_size"]
    h, w = (size, size) if isinstance(size, int) else size
    return (torch.randn(1, args.get("in_chans", 3), h, w, generator=g),)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: os.path.relpath(p, os.path.join(ROOT, "configs")))
def test_a_config_model_rebuilds_from_its_zoo_config(path, one_thread):
    from mmengine.config import Config
    from mmengine.registry import MODELS
    from mmengine.utils import import_modules_from_strings

    import zoo
    cfg = Config.fromfile(path)
    if cfg.get("custom_imports"):
        import_modules_from_strings(**cfg["custom_imports"])
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).zoo_model.eval()
    zc = model.zoo_config
    again = zoo.load(zc["name"], task=zc["task"], **zc["args"]).eval()
    again.load_state_dict(model.state_dict())
    with torch.no_grad():
        if zc["task"] == "gen":
            a, b = again.sample(2, seed=0), model.sample(2, seed=0)
        else:
            x = _inputs(zc["task"], zc["args"])
            a, b = again(*x), model(*x)
    assert torch.allclose(a, b, atol=1e-5), zc
