"""Registry-wide checks on tiny inputs: every registered classifier builds, runs, trains and reports features."""
import subprocess
import sys

import pytest
import torch

import zoo
from zoo import registry
from zoo.backbones.vit import SIZES

ALL = zoo.list_models()
TINY = dict(img_size=32, patch_size=16, num_classes=5)  # 4 patches + cls token


def test_registry_names():
    vit = {f"{m}_vit_{s}" for m in ("sa", "ea", "effa", "ff") for s in ("micro", "mini", "tiny", "small", "base")}
    t2t = {f"{m}_t2t_7" for m in ("sa", "ea", "effa", "ff")}
    assert len(ALL) == 24 == len(set(ALL)) and set(ALL) == vit | t2t
    assert zoo.list_models("ea_*") == ["ea_t2t_7", "ea_vit_base", "ea_vit_micro", "ea_vit_mini", "ea_vit_small",
                                         "ea_vit_tiny"]
    assert set(zoo.list_models(task="seg")) == vit  # every vit backbone works with every task; t2t classifies
    assert zoo.list_models(task="cls") == ALL
    assert (SIZES["micro"], SIZES["mini"], SIZES["tiny"], SIZES["small"], SIZES["base"]) == (
        dict(embed_dim=64, depth=4, num_heads=2), dict(embed_dim=128, depth=4, num_heads=4),
        dict(embed_dim=192, depth=12, num_heads=3), dict(embed_dim=384, depth=12, num_heads=6),
        dict(embed_dim=768, depth=12, num_heads=12))


@pytest.mark.parametrize("name", ALL)
def test_forward_backward_features(name):
    model = zoo.load(name, **TINY)
    x = torch.randn(2, 3, 32, 32)
    out = model(x)
    assert out.shape == (2, 5) and torch.isfinite(out).all()
    out.logsumexp(-1).sum().backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not no_grad, f"parameters without a finite gradient: {no_grad}"

    model.eval()
    info = registry.model_info(name)
    depth = registry.ARCHS[info["arch"]][0][info["size"]]["depth"]
    assert len(model.feature_info) == depth and model.num_features == model.feature_info[0]["num_chs"]
    with torch.no_grad():
        final, feats = model.forward_intermediates(x)
        assert len(feats) == depth
        for f, info in zip(feats, model.feature_info):
            assert f.shape == (2, info["num_chs"], 32 // info["reduction"], 32 // info["reduction"])
        torch.testing.assert_close(final, model.forward_features(x))
        # the last intermediate, normalised, is the final feature map's patch tokens
        last = model.forward_intermediates(x, indices=[-1], norm=True, output_fmt="NLC", intermediates_only=True)
        torch.testing.assert_close(last[0], final[:, 1:])


def test_intermediate_index_forms():
    model = zoo.load("sa_vit_micro", **TINY).eval()
    x = torch.randn(1, 3, 32, 32)
    by_list = model.forward_intermediates(x, indices=[2, 3], intermediates_only=True)
    by_count = model.forward_intermediates(x, indices=2, intermediates_only=True)
    for a, b in zip(by_list, by_count):
        torch.testing.assert_close(a, b)
    with pytest.raises(IndexError, match="out of range"):
        model.forward_intermediates(x, indices=[4])


def test_classifier_surface():
    model = zoo.load("ea_vit_micro", **TINY)
    assert model.forward_head(model.forward_features(torch.randn(1, 3, 32, 32)), pre_logits=True).shape == (1, 64)
    model.reset_classifier(7)
    assert model(torch.randn(1, 3, 32, 32)).shape == (1, 7)
    model.reset_classifier(0)
    assert model(torch.randn(1, 3, 32, 32)).shape == (1, 64)
    assert model.no_weight_decay() == {"pos_embed", "cls_token"}


def test_variable_resolution_resamples_pos_embed_but_ff_refuses():
    sa = zoo.load("sa_vit_micro", **TINY).eval()
    assert sa(torch.randn(1, 3, 48, 64)).shape == (1, 5)
    ff = zoo.load("ff_vit_micro", **TINY)
    with pytest.raises(ValueError, match="expects 32x32 inputs, got 48x64"):
        ff(torch.randn(1, 3, 48, 64))



def test_resampled_pos_embed_is_kept_for_inference_and_redone_when_it_changes(monkeypatch):
    from zoo.backbones import vit
    from zoo.layers import resample_pos_embed
    calls = []
    monkeypatch.setattr(vit, "resample_pos_embed", lambda *a: calls.append(a) or resample_pos_embed(*a))
    m = zoo.load("sa_vit_micro", **TINY).eval()
    x = torch.randn(2, 3, 48, 64)  # a 3 x 4 grid, the model's is 2 x 2

    def fresh():  # what the kept copy must equal: the resample of the current weights
        return resample_pos_embed(m.pos_embed.detach(), (3, 4), 1, (2, 2))
    with torch.no_grad():
        y = m(x)
        assert len(calls) == 1
        assert torch.equal(m(x), y) and len(calls) == 1  # same grid, same weights: kept, same output
        assert torch.equal(m._resampled_pos_embed((3, 4)), fresh())
        m.pos_embed.mul_(2)  # in place (what load_state_dict and optimizer steps do): resampled again
        assert torch.equal(m._resampled_pos_embed((3, 4)), fresh()) and len(calls) == 2
        assert not torch.equal(m(x), y)
        m.pos_embed = torch.nn.Parameter(m.pos_embed.detach() / 2)  # a new parameter with the old values
        assert torch.equal(m(x), y) and len(calls) == 3
        m(torch.randn(1, 3, 64, 48))  # another grid
        assert len(calls) == 4
    with torch.inference_mode():  # inference tensors are kept apart from no_grad ones
        assert torch.equal(m(x), y) and len(calls) == 5
    m.double()  # dtype change swaps .data: resampled again, in float64
    with torch.no_grad():
        assert m._resampled_pos_embed((3, 4)).dtype == torch.float64 and len(calls) == 6
    m.float().train()
    out = m(x)  # with autograd: resampled every call, and the gradient reaches pos_embed
    out.sum().backward()
    assert len(calls) == 7 and m.pos_embed.grad is not None and m.pos_embed.grad.abs().sum() > 0
    assert "_pos_kept" not in "".join(m.state_dict())

def test_in_chans_and_patch_size():
    m = zoo.load("effa_vit_micro", img_size=28, patch_size=4, in_chans=1, num_classes=10)
    assert m(torch.randn(3, 1, 28, 28)).shape == (3, 10)
    assert m.pos_embed.shape == (1, 1 + 49, 64)


def test_bad_names_list_close_matches():
    with pytest.raises(ValueError, match="Close matches: ea_vit_base"):
        zoo.load("ea_vit_bas")
    with pytest.raises(ValueError, match="valid tasks: cls"):
        zoo.load("ea_vit_base", task="detection")
    with pytest.raises(ValueError, match="has no pretrained weights for task 'cls'"):
        zoo.load("ea_vit_base", pretrained=True)


def test_zoo_config_is_plain_json():
    import json
    m = zoo.load("ea_vit_micro", **TINY)
    assert json.loads(json.dumps(m.zoo_config)) == {"name": "ea_vit_micro", "task": "cls", "args": TINY}


def test_import_zoo_pulls_in_no_mm_packages():
    code = ("import sys, zoo; m = zoo.load('sa_vit_micro', img_size=32); "
            "bad = sorted(k for k in sys.modules if k.split('.')[0] in ('mmcv', 'mmseg', 'mmengine')); "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
