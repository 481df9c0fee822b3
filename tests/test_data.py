"""``zoo.preprocess`` / ``zoo.resolve_data_config``: images -> model input, against values computed by hand (the
normalisation, ITU-R 601 luma, torchvision's resize-and-centre-crop geometry, mmcv's keep-ratio scale) and against
PIL's own resize."""
import numpy as np
import pytest
import torch
from PIL import Image

import zoo
from zoo.data import _cls_geometry, _seg_size

FMNIST = "sa_vit_micro.cls_fmnist"
SCENES = "sa_vit_micro.seg_scenes"


def _image(h, w, c=3, seed=0):
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, c) if c else (h, w), dtype=np.uint8)


def test_data_config_of_the_bundled_and_upstream_entries():
    cls = zoo.resolve_data_config(FMNIST)
    assert cls["task"] == "cls" and cls["input_size"] == (1, 28, 28) and cls["crop_pct"] == 1.0
    assert cls["mean"] == pytest.approx((72.94 / 255,)) and cls["std"] == pytest.approx((90.02 / 255,))
    deit = zoo.resolve_data_config("sa_vit_base.cls_in1k")  # DeiT's eval transform: 256 -> 224 centre, bicubic
    assert deit["crop_pct"] == 0.875 and deit["interpolation"] == "bicubic" and deit["input_size"] == (3, 224, 224)
    assert zoo.resolve_data_config("sa_vit_small.seg_ade20k")["test_scale"] == (2048, 512)
    assert zoo.resolve_data_config(SCENES)["test_scale"] == (256, 64)
    model = zoo.load("ea_vit_tiny", task="seg", num_classes=5)  # no weights: its own crop, ImageNet statistics
    cfg = zoo.resolve_data_config(model)
    assert cfg["input_size"] == (3, 512, 512) and cfg["test_scale"] is None and cfg["mean"] == (0.485, 0.456, 0.406)
    assert zoo.resolve_data_config(zoo.load(FMNIST)) == cls
    with pytest.raises(ValueError, match="preprocess prepares images"):
        zoo.resolve_data_config("sa_vit_micro.pcls_shapes")


def test_normalisation_by_hand_and_every_layout_gives_the_same_batch():
    img = _image(28, 28, c=None)
    mean, std = 72.94 / 255, 90.02 / 255
    expected = (img.astype(np.float64) / 255 - mean) / std
    x = zoo.preprocess(img, FMNIST)
    assert x.shape == (1, 1, 28, 28) and x.dtype == torch.float32
    np.testing.assert_allclose(x[0, 0].numpy(), expected, atol=1e-5)
    batch = np.stack([img, img[::-1]])  # (N, H, W): the IDX layout
    ways = [zoo.preprocess(batch, FMNIST), zoo.preprocess([Image.fromarray(img), Image.fromarray(img[::-1].copy())],
                                                          FMNIST),
            zoo.preprocess(torch.from_numpy(batch)[:, None], FMNIST), zoo.preprocess(batch[..., None], FMNIST),
            zoo.preprocess(torch.from_numpy(batch)[:, None].float() / 255, FMNIST)]
    for y in ways:
        assert y.shape == (2, 1, 28, 28)
        torch.testing.assert_close(y, ways[0], atol=1e-5, rtol=0)
    np.testing.assert_allclose(ways[0][1, 0].numpy(), expected[::-1], atol=1e-5)


def test_channels_are_fitted_to_the_model():
    rgb = _image(28, 28, 3)
    # uint8 arrays take PIL's path for classifiers: PIL's fixed-point ITU-R 601-2 luma, rounded to a grey level
    r, g_, b = (rgb[..., k].astype(np.int64) for k in range(3))
    grey_pil = ((r * 19595 + g_ * 38470 + b * 7471 + 0x8000) >> 16) / 255
    x = zoo.preprocess(rgb, FMNIST)
    np.testing.assert_allclose(x[0, 0].numpy(), (grey_pil - 72.94 / 255) / (90.02 / 255), atol=1e-5)
    grey = (rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])) / 255  # float images: the luma in float
    xf = zoo.preprocess(rgb.astype(np.float32) / 255, FMNIST)
    np.testing.assert_allclose(xf[0, 0].numpy(), (grey - 72.94 / 255) / (90.02 / 255), atol=1e-5)
    rgba = np.concatenate([rgb, np.zeros((28, 28, 1), np.uint8)], axis=-1)  # alpha is dropped
    torch.testing.assert_close(zoo.preprocess(rgba, FMNIST), x)
    g28 = _image(28, 28, c=None)
    grey_alpha = np.stack([g28, np.full_like(g28, 255)], axis=-1)  # (H, W, 2): grey + alpha, alpha dropped
    torch.testing.assert_close(zoo.preprocess(grey_alpha, FMNIST), zoo.preprocess(g28, FMNIST))
    g = _image(64, 64, c=None)
    y = zoo.preprocess(g, SCENES)  # grey into a colour model: the grey value on all three channels
    m, s = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(y[0].numpy(), (g[None] / 255 - m[:, None, None]) / s[:, None, None], atol=1e-5)


@pytest.mark.parametrize("hw, size, crop_pct, resized, box", [
    ((300, 400), (224, 224), 0.875, (256, 341), (16, 58, 224, 224)),  # torchvision: short side 256, int(256*4/3)
    ((500, 375), (224, 224), 0.875, (341, 256), (58, 16, 224, 224)),
    ((40, 56), (28, 28), 1.0, (28, 39), (0, 6, 28, 28)),  # round((39 - 28) / 2) = round(5.5) = 6
    ((100, 100), (30, 40), 0.5, (60, 80), (15, 20, 30, 40)),  # non-square input size: both sides
    ((224, 224), (224, 224), 0.875, (256, 256), (16, 16, 224, 224)),  # the input size too, as timm
])
def test_classifier_geometry_is_timms_eval_transform(hw, size, crop_pct, resized, box):
    assert _cls_geometry(hw, size, crop_pct) == (resized, box)


def test_classifier_resize_and_crop_match_pil():
    img = _image(40, 56, c=None, seed=1)
    x = zoo.preprocess(torch.from_numpy(img)[None], FMNIST)  # tensor path: F.interpolate, antialiased
    y = zoo.preprocess(Image.fromarray(img), FMNIST)  # PIL path, as timm's transform
    assert torch.equal(zoo.preprocess(img, FMNIST), y)  # a uint8 array takes the PIL path
    ref = np.asarray(Image.fromarray(img).resize((39, 28), Image.BICUBIC), dtype=np.float64)[:, 6:34]
    np.testing.assert_allclose(y[0, 0].numpy(), (ref / 255 - 72.94 / 255) / (90.02 / 255), atol=1e-5)
    assert x.shape == y.shape == (1, 1, 28, 28)
    assert float((x - y).abs().max()) * 90.02 / 255 < 6 / 255  # the two resamplers agree to a few grey levels
    with pytest.raises(ValueError, match="takes 28x28 images, got 40x56"):
        zoo.preprocess(img, FMNIST, resize=False)
    deit = dict(zoo.resolve_data_config("sa_vit_base.cls_in1k"))  # crop_pct 0.875: a 224 image is zoomed in
    rgb = Image.fromarray(_image(224, 224, seed=2))
    ref = np.asarray(rgb.resize((256, 256), Image.BICUBIC), dtype=np.float64)[16:240, 16:240] / 255
    m, s = np.array(deit["mean"]), np.array(deit["std"])
    np.testing.assert_allclose(zoo.preprocess(rgb, deit)[0].permute(1, 2, 0).numpy(), (ref - m) / s, atol=1e-5)


def test_segmentor_scale_is_mmcvs_keep_ratio_rescale():
    assert _seg_size((375, 500), (2048, 512)) == (512, 683)  # min(2048/500, 512/375) = 1.3653
    assert _seg_size((512, 2500), (2048, 512)) == (419, 2048)  # the long side binds
    assert _seg_size((64, 64), (256, 64)) == (64, 64)
    x = zoo.preprocess(_image(375, 500), "sa_vit_small.seg_ade20k")
    assert x.shape == (1, 3, 512, 683)
    assert zoo.preprocess(_image(375, 500), "sa_vit_small.seg_ade20k", resize=False).shape == (1, 3, 375, 500)
    with pytest.raises(ValueError, match="different sizes"):
        zoo.preprocess([_image(375, 500), _image(500, 375)], "sa_vit_small.seg_ade20k")


@pytest.mark.parametrize("hw", [(600, 900), (200, 300)])  # shrunk (factor 0.853) and enlarged (2.56)
def test_segmentor_resize_is_mmcvs_opencv_resize(hw):
    """What mmseg's test pipeline feeds the model: ``mmcv.imrescale`` (OpenCV bilinear) of the uint8 image, kept
    uint8, then normalised. PIL images take the same path (PIL's own bilinear averages over a wider window when it
    shrinks: up to 19 levels off on this image before that was fixed)."""
    mmcv = pytest.importorskip("mmcv")
    smooth = np.asarray(Image.fromarray(_image(12, 18)).resize(hw[::-1], Image.BICUBIC)).astype(int)
    img = np.clip(smooth + np.random.default_rng(1).integers(-30, 30, smooth.shape), 0, 255).astype(np.uint8)
    cfg = zoo.resolve_data_config("sa_vit_small.seg_ade20k")
    ref = mmcv.imrescale(img, (2048, 512), interpolation="bilinear", backend="cv2").astype(np.float64)
    ours = [zoo.preprocess(x, cfg)[0].double() for x in (img, Image.fromarray(img))]
    assert torch.equal(ours[0], ours[1])  # a uint8 array and a PIL image of it give the same input
    std, mean = np.array(cfg["std"]) * 255, np.array(cfg["mean"]) * 255
    levels = ours[0].permute(1, 2, 0).numpy() * std + mean  # back to 0..255
    diff = np.abs(levels - ref)
    assert diff.max() < 1 + 1e-3  # OpenCV's fixed-point weights round some pixels the other way
    assert (diff < 1e-3).mean() > 0.8  # and most pixels exactly
    floats = zoo.preprocess(torch.from_numpy(img).permute(2, 0, 1) / 255.0, cfg)[0].double()  # a float image is
    assert np.abs(floats.permute(1, 2, 0).numpy() * std + mean - ref).max() < 0.8  # not rounded: within 0.5 + weights


def test_bad_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="must be in 0..1.*divide"):
        zoo.preprocess(np.full((28, 28), 200.0, dtype=np.float32), FMNIST)
    with pytest.raises(ValueError, match="dtype torch.int64"):
        zoo.preprocess(np.zeros((28, 28), dtype=np.int64), FMNIST)
    with pytest.raises(ValueError, match="cannot read an image batch of shape"):
        zoo.preprocess(np.zeros((1, 2, 28, 28, 1), np.uint8), FMNIST)
    with pytest.raises(ValueError, match=r"one \(C, H, W\) image .* \(N, 1, H, W\)"):
        zoo.preprocess(torch.zeros(5, 28, 28, dtype=torch.uint8), FMNIST)  # torchvision's convention: CHW
    batch = np.zeros((2, 28, 28), np.uint8)
    for tag in (FMNIST, SCENES):  # a list holds single images, for classifiers (PIL path) and segmentors alike
        with pytest.raises(ValueError, match="item 0 of the list holds 2 images"):
            zoo.preprocess([batch], tag)
    with pytest.raises(TypeError, match="PIL images, numpy arrays, tensors"):
        zoo.preprocess("image.png", FMNIST)



@pytest.mark.parametrize("tag", [FMNIST, SCENES])
def test_the_cards_usage_code_runs(tag, tmp_path, monkeypatch):
    """The Usage block of a bundled card, run as written (the Hub id swapped for the tag: no network here)."""
    import os
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pretrained", tag, "README.md")) as f:
        code = f.read().split("## Usage")[1].split("```python")[1].split("```")[0]
    Image.fromarray(_image(40, 30)).save(tmp_path / "image.png")
    monkeypatch.chdir(tmp_path)
    ns = {}
    exec(code.replace(f"hf-hub:zoo-models/{tag}", tag), ns)
    num_classes = zoo.load(tag).pretrained_cfg["num_classes"]
    out = ns["probs"] if "probs" in ns else ns["logits"]
    assert out.shape[:2] == (1, num_classes) and torch.isfinite(out).all()
