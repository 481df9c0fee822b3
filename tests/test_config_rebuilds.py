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


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: os.path.relpath(p, os.path.join(ROOT, "configs")))
def test_a_config_model_rebuilds_from_its_zoo_config(path, one_thread):
    from mmengine.config import Config
    from mmengine.registry import MODELS
    from mmengine.utils import import_modules_from_strings

    import zoo
    from tasks.common.evaluate import same_model
    cfg = Config.fromfile(path)
    if cfg.get("custom_imports"):
        import_modules_from_strings(**cfg["custom_imports"])
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).zoo_model
    zc = model.zoo_config
    again = zoo.load(zc["name"], task=zc["task"], **zc["args"])
    again.load_state_dict(model.state_dict())
    assert same_model(again, model, "zoo_config", os.path.basename(path), atol=1e-5) <= 1e-5
