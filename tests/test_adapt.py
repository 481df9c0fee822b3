"""Pretrained weights adapted to other data (``zoo.adapt``): a fresh classifier, other input channels, another size.

The bundled checkpoints are the weights: every check compares the adapted model with the model loaded as trained.
"""
import logging

import pytest
import torch

import zoo
from zoo.layers import PatchEmbed, adapt_in_chans


def _same_except(adapted, trained, changed):
    """Every tensor of ``trained`` is in ``adapted`` unchanged, except the keys starting with ``changed``."""
    a, t = adapted.state_dict(), trained.state_dict()
    kept = [k for k in t if not k.startswith(changed)]
    assert kept and all(torch.equal(a[k], t[k]) for k in kept)
    return a, t


def test_cls_num_classes_in_chans_img_size(caplog, tmp_path):
    trained = zoo.load("ea_vit_micro.cls_fmnist").eval()
    with caplog.at_level(logging.INFO, logger="zoo.adapt"):
        model = zoo.load("ea_vit_micro", pretrained=True, num_classes=5, in_chans=3, img_size=56).eval()
    assert "num_classes=5 (trained with 10), in_chans=3 (trained with 1), img_size=[56, 56]" in caplog.text
    a, t = _same_except(model, trained, ("head.", "patch_embed.proj.weight", "pos_embed"))
    assert a["head.weight"].shape == (5, 64) and a["patch_embed.proj.weight"].shape == (64, 3, 4, 4)
    assert a["pos_embed"].shape == (1, 1 + 14 * 14, 64) and model.patch_embed.img_size == (56, 56)
    assert model.zoo_config["args"] == dict(num_classes=5, in_chans=3, img_size=[56, 56], patch_size=4)
    cfg = model.pretrained_cfg
    assert cfg["num_classes"] == 5 and cfg["label_names"] is None and cfg["input_size"] == [3, 56, 56]
    assert cfg["mean"] == [trained.pretrained_cfg["mean"][0]] * 3 and len(cfg["std"]) == 3
    assert cfg["adapted"] == {"num_classes": [10, 5], "in_chans": [1, 3], "img_size": [[28, 28], [56, 56]]}
    assert cfg["metrics"] == trained.pretrained_cfg["metrics"]  # the published weights' numbers, as published
    x = torch.rand(2, 3, 56, 56)
    with torch.no_grad():
        assert model(x).shape == (2, 5)
        # the adapted model is what config.json rebuilds: publishing it and loading it back gives the same outputs
        zoo.save_pretrained(model, tmp_path)
        torch.testing.assert_close(zoo.load(f"local-dir:{tmp_path}").eval()(x), model(x), rtol=0, atol=0)


def test_in_chans_keeps_the_response_to_grey_images(tmp_path):
    trained = zoo.load("sa_vit_micro.cls_fmnist").eval()
    colour = zoo.load("sa_vit_micro.cls_fmnist", in_chans=3).eval()
    x = torch.rand(4, 1, 28, 28)
    with torch.no_grad():  # a grey image given as three equal channels: the trained model's logits
        torch.testing.assert_close(colour(x.expand(-1, 3, -1, -1)), trained(x), rtol=1e-5, atol=1e-5)
        # and back: a colour model made grey answers a grey image as it answered its three equal channels
        zoo.save_pretrained(colour, tmp_path)
        grey = zoo.load(f"local-dir:{tmp_path}", in_chans=1).eval()
        torch.testing.assert_close(grey(x), colour(x.expand(-1, 3, -1, -1)), rtol=1e-5, atol=1e-5)


def test_adapt_in_chans_by_hand():
    w = torch.arange(2 * 1 * 2 * 2, dtype=torch.float32).view(2, 1, 2, 2)
    three = adapt_in_chans(w, 3)
    assert three.shape == (2, 3, 2, 2) and torch.equal(three[:, 1], w[:, 0] / 3)
    assert torch.equal(adapt_in_chans(three, 1), three.sum(dim=1, keepdim=True))
    assert adapt_in_chans(w, 1) is w
    with pytest.raises(ValueError, match=r"3 input channels does not adapt to in_chans=4 .*in_chans=3"):
        adapt_in_chans(three, 4)


def test_img_size_stores_the_embedding_the_trained_model_resamples():
    trained = zoo.load("effa_vit_micro.cls_fmnist").eval()
    bigger = zoo.load("effa_vit_micro.cls_fmnist", img_size=(36, 44)).eval()
    x = torch.rand(2, 1, 36, 44)
    with torch.no_grad():  # resampled once at load == resampled at each forward by the trained model
        torch.testing.assert_close(bigger(x), trained(x), rtol=1e-5, atol=1e-5)
    assert bigger.num_tokens == 1 + 9 * 11 and bigger.pos_embed.shape[1] == bigger.num_tokens


def test_ff_changes_classes_but_not_its_token_count():
    model = zoo.load("ff_vit_micro", pretrained=True, num_classes=3)
    assert model(torch.rand(1, 1, 28, 28)).shape == (1, 3)
    with pytest.raises(ValueError, match=r"ff mixer's weights are sized by the token count \(50 tokens at 28x28\), "
                                         r"so the model cannot take 32x32 inputs; resize the images to 28x28"):
        zoo.load("ff_vit_micro", pretrained=True, img_size=32)


def test_same_values_change_nothing():
    model = zoo.load("ea_vit_micro", pretrained=True, num_classes=10, in_chans=1, img_size=(28, 28))
    trained = zoo.load("ea_vit_micro.cls_fmnist")
    _same_except(model, trained, ())
    assert "adapted" not in model.pretrained_cfg and model.pretrained_cfg["label_names"][0] == "T-shirt/top"


def test_seg_gets_fresh_classifiers_in_both_heads(tmp_path):
    trained = zoo.load("ea_vit_micro.seg_scenes").eval()
    model = zoo.load("ea_vit_micro", task="seg", pretrained=True, num_classes=4).eval()
    a, _ = _same_except(model, trained, ("decode_head.conv_seg.", "auxiliary_head.conv_seg."))
    assert a["decode_head.conv_seg.weight"].shape == (4, 64, 1, 1)
    assert a["auxiliary_head.conv_seg.weight"].shape == (4, 32, 1, 1)
    assert model.decode_head.num_classes == model.auxiliary_head.num_classes == model.num_classes == 4
    assert model.zoo_config["args"]["num_classes"] == 4 and model.pretrained_cfg["num_classes"] == 4
    assert 0.005 < float(a["decode_head.conv_seg.weight"].std()) < 0.02  # mmseg's init: normal, std 0.01
    x = torch.rand(1, 3, 64, 64)
    with torch.no_grad():
        assert model(x).shape == (1, 4, 64, 64)
        zoo.save_pretrained(model, tmp_path)
        torch.testing.assert_close(zoo.load(f"local-dir:{tmp_path}").eval()(x), model(x), rtol=0, atol=0)


def test_seg_crop_size():
    trained = zoo.load("effa_vit_micro.seg_scenes").eval()
    model = zoo.load("effa_vit_micro.seg_scenes", img_size=96).eval()
    assert model.backbone.img_size == (96, 96) and model.data_preprocessor.size == (96, 96)
    assert model.backbone.trunk.pos_embed.shape[1] == 1 + 24 * 24 and model.zoo_config["args"]["img_size"] == [96, 96]
    x = torch.rand(1, 3, 96, 96)
    with torch.no_grad():  # the embedding stored at the new crop == the trained one resampled at the forward
        torch.testing.assert_close(model(x), trained(x), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"ff mixer's weights are sized by the token count"):
        zoo.load("ff_vit_micro.seg_scenes", img_size=96)


@pytest.mark.parametrize("task", ["pcls", "pseg"])
def test_point_models_get_a_fresh_last_layer(task):
    trained = zoo.load(f"sa_vit_micro.{task}_shapes")
    model = zoo.load("sa_vit_micro", task=task, pretrained=True, num_classes=7)
    last = f"head.{len(model.head) - 1}."
    a, _ = _same_except(model, trained, (last,))
    assert a[last + "weight"].shape[0] == 7 and model.num_classes == 7
    assert model.zoo_config["args"]["num_classes"] == 7


@pytest.mark.parametrize("name,task,kw,match", [
    ("ea_vit_micro", "gen", dict(num_classes=3), r"\(gen\) cannot adapt .* a generator has no classifier"),
    ("ea_vit_micro", "seg", dict(in_chans=1), r"backbone_checkpoint=<a cls tag>"),
    ("ea_vit_micro", "pcls", dict(in_chans=3), r"\(pcls\) cannot adapt .* to in_chans=3: a point model reads points"),
])
def test_what_cannot_adapt_is_named(name, task, kw, match):
    with pytest.raises(ValueError, match=match):
        zoo.load(name, task=task, pretrained=True, **kw)


def test_no_head_and_bad_values():
    features = zoo.load("ea_vit_micro.cls_fmnist", num_classes=0)  # timm's pretrained feature extractor
    assert features(torch.rand(2, 1, 28, 28)).shape == (2, 64) and features.pretrained_cfg["num_classes"] == 0
    with pytest.raises(ValueError, match=r"num_classes must be an integer >= 1 for seg, got 0"):
        zoo.load("ea_vit_micro.seg_scenes", num_classes=0)
    with pytest.raises(ValueError, match=r"in_chans must be an integer >= 1 for cls, got 2.5"):
        zoo.load("ea_vit_micro.cls_fmnist", in_chans=2.5)


def test_patch_embed_names_a_channel_mismatch():
    with pytest.raises(ValueError, match=r"takes 3-channel images, got 1 channels .* in_chans=1"):
        PatchEmbed(32, 16, 3, 8)(torch.zeros(1, 1, 32, 32))
