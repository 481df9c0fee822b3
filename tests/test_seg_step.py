"""tools/seg_step.py: the step it times is a real training step of the config's model, on the config's crop."""
import os

import pytest
import torch

from tests.load_tool import ROOT, load_tool

CFG = os.path.join(ROOT, "configs/seg/upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64.py")


def test_random_batch_matches_the_crop_and_classes():
    tool = load_tool("seg_step")
    batch = tool.random_batch(3, (64, 48), 11, seed=1)
    assert [tuple(x.shape) for x in batch["inputs"]] == [(3, 64, 48)] * 3
    labels = torch.stack([s.gt_sem_seg.data for s in batch["data_samples"]])
    assert labels.shape == (3, 1, 64, 48) and labels.min() >= 0 and labels.max() == 10
    again = tool.random_batch(3, (64, 48), 11, seed=1)
    assert all(torch.equal(a, b) for a, b in zip(batch["inputs"], again["inputs"]))


def test_the_timed_step_trains_the_configured_model():
    from mmengine.config import Config
    tool = load_tool("seg_step")
    cfg = Config.fromfile(CFG)
    cfg.merge_from_dict({"model.neck.scales": [1, 0.5, 0.25, 0.125]})
    model, optim = tool.build(cfg)
    assert list(model.neck.scales) == [1, 0.5, 0.25, 0.125] and model.training
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    losses = model.train_step(tool.random_batch(2, tuple(cfg.crop_size), 11), optim)
    assert torch.isfinite(losses["loss"])
    changed = [k for k, v in model.named_parameters() if not torch.equal(before[k], v)]
    assert any(k.startswith("backbone.") for k in changed) and any(k.startswith("decode_head.") for k in changed)


def test_main_reports_the_median_and_rejects_other_configs(capsys):
    tool = load_tool("seg_step")
    out = tool.main([CFG, "--batch", "2", "--warmup", "0", "--steps", "2",
                     "--cfg-options", "model.decode_head.channels=16", "model.auxiliary_head.channels=8"])
    assert out["batch"] == 2 and out["crop_size"] == [64, 64] and out["steps"] == 2 and out["median_step_s"] > 0
    assert '"median_step_s"' in capsys.readouterr().out
    with pytest.raises(SystemExit, match="segmentation configs only"):
        tool.main([os.path.join(ROOT, "configs/cls/ea-vit-micro-p4_1xb128-16e_fmnist-28.py"), "--steps", "1"])
