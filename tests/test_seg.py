"""Segmentation models: the mmseg backbone adapter, the UPerNet segmentor behind ``zoo.load(task='seg')``, weight
loading that survives ``init_weights``, the fixed-token (``ff``) rules and the ``mmcv._ext`` stand-in."""
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIXERS = ("sa", "ea", "effa", "ff")
# Small enough for a CPU test: 64x64 inputs, patch 8 (8x8 grid), narrow heads.
SMALL = dict(num_classes=5, img_size=64, patch_size=8, channels=32, aux_channels=16)


def _same(a, b):
    return set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def _state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_import_zoo_loads_no_mm_packages():
    code = ("import sys, zoo; zoo.list_models(); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('mmcv', 'mmseg', 'mmengine')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("mixer", MIXERS)
def test_tensor_forward_gives_full_resolution_logits(mixer):
    model = zoo.load(f"{mixer}_vit_micro", task="seg", **SMALL)
    assert model.zoo_model is model
    model.eval()
    with torch.no_grad():
        x = torch.randn(2, 3, 64, 64)
        y = model(x)
        assert y.shape == (2, 5, 64, 64) and torch.isfinite(y).all()
        # other sizes: ff slides a 64 window, the others resample position embeddings (and pad to patch multiples)
        y = model(torch.randn(1, 3, 100, 75))
        assert y.shape == (1, 5, 100, 75) and torch.isfinite(y).all()


@pytest.mark.parametrize("head", ["uper", "segformer"])
def test_logits_are_the_head_output_resized_bilinearly(head):
    # encode_decode resizes in channels-last layout (faster on CPU): the values must be those of a plain NCHW
    # bilinear resize of the decode head's output, and predict's labels their argmax
    model = zoo.load("ea_vit_micro", task="seg", decode_head=head, **dict(SMALL, aux_channels=0)).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        low = model.decode_head(model.extract_feat(x))  # backbone + neck + head, before any resize
        expected = F.interpolate(low.contiguous(), size=(64, 64), mode="bilinear", align_corners=False)
        logits = model(x)
        labels = model.predict(x)
    assert logits.shape == expected.shape and low.shape[-1] < 64
    torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)
    assert torch.equal(torch.stack([s.pred_sem_seg.data[0] for s in labels]), expected.argmax(1))


def test_backbone_returns_the_trunk_blocks_it_names():
    model = zoo.load("sa_vit_tiny", task="seg", num_classes=3, img_size=32).eval()
    assert model.backbone.out_indices == [2, 5, 8, 11]  # mmseg's DeiT recipe for 12 blocks
    micro = zoo.load("ea_vit_micro", task="seg", **SMALL).eval()
    assert micro.backbone.out_indices == [0, 1, 2, 3]  # depth 4: every block
    trunk = micro.backbone.trunk
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        feats = micro.backbone(x)
        # independent: embed, run the blocks by hand, drop the cls token, tokens -> maps
        tok, hw = trunk._embed(x)
        expected = []
        for blk in trunk.blocks:
            tok = blk(tok)
            expected.append(tok[:, 1:].transpose(1, 2).reshape(2, 64, 8, 8))
    assert len(feats) == 4
    for f, e in zip(feats, expected):
        torch.testing.assert_close(f, e)


def test_recipe_modules():
    model = zoo.load("effa_vit_small", task="seg", num_classes=150, img_size=64)
    neck, head, aux = model.neck, model.decode_head, model.auxiliary_head
    assert type(neck).__name__ == "MultiLevelNeck" and list(neck.scales) == [4, 2, 1, 0.5]
    assert list(neck.in_channels) == [384] * 4 and neck.out_channels == 384
    assert type(head).__name__ == "UPerHead" and head.channels == 512
    assert tuple(head.psp_modules.pool_scales) == (1, 2, 3, 6)
    assert head.dropout_ratio == 0.1 and head.align_corners is False and list(head.in_index) == [0, 1, 2, 3]
    assert type(aux).__name__ == "FCNHead" and aux.channels == 256 and aux.in_index == 3
    assert aux.loss_decode.loss_weight == 0.4 and head.loss_decode.loss_weight == 1.0
    assert isinstance(head.bottleneck.bn, torch.nn.BatchNorm2d)  # BN (SyncBN does not run on CPU)


def test_loss_and_predict_paths():
    from mmseg.structures import SegDataSample
    from mmengine.structures import PixelData
    model = zoo.load("sa_vit_micro", task="seg", **SMALL)
    x = torch.randn(2, 3, 64, 64)
    samples = []
    for i in range(2):
        s = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64)))
        s.gt_sem_seg = PixelData(data=torch.randint(0, 5, (1, 64, 64)))
        samples.append(s)
    losses = model(x, samples, mode="loss")
    assert set(losses) >= {"decode.loss_ce", "aux.loss_ce"}
    sum(v for k, v in losses.items() if "loss" in k).backward()
    assert model.backbone.trunk.blocks[0].mixer.qkv.weight.grad is not None
    model.eval()
    with torch.no_grad():
        out = model(x, samples, mode="predict")
        logits = model(x)
    assert out[0].pred_sem_seg.data.shape == (1, 64, 64)
    torch.testing.assert_close(out[1].seg_logits.data, logits[1])
    assert torch.equal(out[1].pred_sem_seg.data[0], logits[1].argmax(0))


def test_ff_fixed_tokens_errors_and_slide():
    model = zoo.load("ff_vit_micro", task="seg", **SMALL).eval()
    assert model.test_cfg.mode == "slide" and tuple(model.test_cfg.crop_size) == (64, 64)
    with torch.no_grad():
        assert model(torch.randn(1, 3, 130, 97)).shape == (1, 5, 130, 97)  # slide windows cover any size
        model.test_cfg.mode = "whole"
        with pytest.raises(ValueError, match="slide"):
            model(torch.randn(1, 3, 130, 97))
        assert model(torch.randn(1, 3, 50, 64)).shape == (1, 5, 50, 64)  # smaller than the crop: padded
    with pytest.raises(ValueError, match="fixed token count.*slide"):
        model.backbone(torch.randn(1, 3, 96, 96))  # the training path refuses other sizes too



@pytest.mark.parametrize("size", [(64, 64), (130, 97), (50, 150)])
def test_slide_inference_gives_mmsegs_logits(size):
    """The zoo's slide_inference against mmseg's own (the parent class method) on the same model and input."""
    from mmseg.models.segmentors import EncoderDecoder
    torch.manual_seed(0)
    model = zoo.load("ff_vit_micro", task="seg", **SMALL).eval()
    x = torch.randn(2, 3, *size)
    metas = lambda: [dict(img_shape=size, ori_shape=size, pad_shape=size) for _ in range(2)]  # noqa: E731
    with torch.no_grad():
        ours = model.slide_inference(x, metas())
        theirs = EncoderDecoder.slide_inference(model, x, metas())
    assert ours.shape == (2, 5, *size) and torch.equal(ours, theirs)


def test_slide_windows_cover_the_image_or_refuse():
    from zoo.heads.seg import slide_windows
    assert slide_windows((130, 97), 64, 42) == [(0, 64, 0, 64), (0, 64, 33, 97), (42, 106, 0, 64), (42, 106, 33, 97),
                                                 (66, 130, 0, 64), (66, 130, 33, 97)]
    assert slide_windows((50, 40), 64, 42) == [(0, 50, 0, 40)]  # smaller than the crop: the whole image
    with pytest.raises(ValueError, match="stride .* between 1 and the crop"):
        slide_windows((130, 97), 64, 70)


@pytest.mark.parametrize("mixer", MIXERS)
def test_models_export_with_torch_export(mixer):
    """torch.export traces every mixer's classifier (at another input size than built, except ff) and segmentor
    (ff slides its window), and the exported program gives the eager outputs."""
    torch.manual_seed(0)
    clf = zoo.load(f"{mixer}_vit_micro", img_size=32, num_classes=5).eval()
    seg = zoo.load(f"{mixer}_vit_micro", task="seg", **SMALL).eval()
    for model, x in ((clf, torch.randn(2, 3, 32, 32) if mixer == "ff" else torch.randn(2, 3, 48, 64)),
                     (seg, torch.randn(1, 3, 96, 80))):
        with torch.no_grad():
            exported = torch.export.export(model, (x,)).module()
            torch.testing.assert_close(exported(x), model(x))

def test_zoo_config_rebuilds_the_architecture():
    model = zoo.load("ea_vit_micro", task="seg", **SMALL)
    cfg = json.loads(json.dumps(model.zoo_config))  # plain JSON
    assert cfg == dict(name="ea_vit_micro", task="seg", args=dict(SMALL, in_chans=3))
    again = zoo.load(cfg["name"], task=cfg["task"], **cfg["args"])
    a, b = model.state_dict(), again.state_dict()
    assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in b.items()}


def test_the_neck_rescaling_of_a_config_is_recorded_and_rebuilt():
    """The neck's rescaling holds no weights, so only zoo_config can carry it: a segmentor built from a config
    that changes it (the patch-4 scenes configs: 2, 1, 1/2, 1/4) must record it and rebuild the same outputs."""
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    from zoo.heads.seg import NECK_SCALES, model_cfg
    cfg = model_cfg("sa_vit_micro", **dict(SMALL, patch_size=4))
    cfg.neck.scales = [2, 1, 0.5, 0.25]  # as configs/seg/_base_/models/upernet_zoo-vit-micro-p4_scenes.py does
    with DefaultScope.overwrite_default_scope("mmseg"):
        built = MODELS.build(cfg)
    built.init_weights()
    args = json.loads(json.dumps(built.zoo_config))["args"]
    assert args["neck_scales"] == [2, 1, 0.5, 0.25]
    again = zoo.load("sa_vit_micro", task="seg", **args)
    assert again.neck.scales == [2, 1, 0.5, 0.25]
    again.load_state_dict(built.state_dict())
    x = torch.randn(2, 3, 64, 64)
    default = zoo.load("sa_vit_micro", task="seg", **dict(SMALL, patch_size=4))
    default.load_state_dict(built.state_dict())  # loads without a key mismatch, yet is another model
    with torch.no_grad():
        ref = built.eval()(x)
        assert torch.allclose(again.eval()(x), ref, atol=1e-5)
        assert not torch.allclose(default.eval()(x), ref, atol=1e-2)
    # the heads' defaults are not recorded; a wrong count or an unsupported factor is refused by name
    assert "neck_scales" not in default.zoo_config["args"] and default.neck.scales == NECK_SCALES["uper"]
    with pytest.raises(ValueError, match="one factor per trunk map"):
        zoo.load("sa_vit_micro", task="seg", **SMALL, neck_scales=[2, 1])
    with pytest.raises(ValueError, match="Feature2Pyramid rescales by"):
        zoo.load("sa_vit_micro", task="seg", **SMALL, decode_head="segformer", neck_scales=[8, 1, 0.5, 0.25])
    light = zoo.load("sa_vit_micro", task="seg", **SMALL, decode_head="segformer", neck_scales=[4, 2, 1, 0.5])
    assert light.zoo_config["args"]["neck_scales"] == [4, 2, 1, 0.5] and light.neck.rescales == [4, 2, 1, 0.5]


def test_checkpoint_survives_init_weights(tmp_path):
    from safetensors.torch import save_file
    src = zoo.load("effa_vit_micro", task="seg", **SMALL)
    with torch.no_grad():
        for p in src.parameters():
            p.add_(torch.randn_like(p))  # differ from any initialisation
    path = tmp_path / "seg.safetensors"
    save_file({k: v.contiguous() for k, v in src.state_dict().items()}, str(path))
    model = zoo.load("effa_vit_micro", task="seg", checkpoint=str(path), **SMALL)
    assert _same(_state(model), _state(src))
    model.init_weights()  # what the Runner calls
    assert _same(_state(model), _state(src))


def test_mmengine_loaded_weights_survive_init_weights():
    """A config-built (not yet initialised) segmentor: load, then the Runner-style init_weights must be a no-op."""
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    from zoo.heads.seg import model_cfg
    from mmengine.runner.checkpoint import load_state_dict
    src = zoo.load("sa_vit_micro", task="seg", **SMALL)
    with torch.no_grad():
        for p in src.parameters():
            p.add_(1.0)
    with DefaultScope.overwrite_default_scope("mmseg"):
        model = MODELS.build(model_cfg("sa_vit_micro", num_classes=5, img_size=64, patch_size=8, channels=32,
                                       aux_channels=16))
    load_state_dict(model, src.state_dict(), strict=True)
    model.init_weights()
    assert _same(_state(model), _state(src))


def test_backbone_checkpoint_from_classification(tmp_path):
    from safetensors.torch import save_file
    cls = zoo.load("sa_vit_micro", num_classes=10, img_size=32, patch_size=8)  # 4x4 grid
    path = tmp_path / "cls.safetensors"
    save_file({k: v.contiguous() for k, v in cls.state_dict().items()}, str(path))
    seg = zoo.load("sa_vit_micro", task="seg", backbone_checkpoint=str(path), **SMALL)  # 8x8 grid
    trunk = seg.backbone.trunk
    for k, v in cls.state_dict().items():
        if k.startswith("blocks.") or k.startswith("patch_embed.") or k == "cls_token":
            assert torch.equal(trunk.state_dict()[k], v), k
    # position embedding: cls row kept, the 4x4 grid bicubically resampled to 8x8 (computed here independently)
    pos = cls.pos_embed.detach()
    grid = pos[:, 1:].reshape(1, 4, 4, 64).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(8, 8), mode="bicubic", align_corners=False).permute(0, 2, 3, 1).reshape(1, 64, 64)
    torch.testing.assert_close(trunk.pos_embed.detach(), torch.cat([pos[:, :1], grid], dim=1))
    before = _state(seg)
    seg.init_weights()
    assert _same(_state(seg), before)
    assert "backbone_checkpoint" not in seg.zoo_config["args"]  # a load-time option, not architecture


def test_ff_backbone_checkpoint_of_another_token_count_is_refused(tmp_path):
    from safetensors.torch import save_file
    cls = zoo.load("ff_vit_micro", num_classes=10, img_size=32, patch_size=8)
    path = tmp_path / "ff.safetensors"
    save_file({k: v.contiguous() for k, v in cls.state_dict().items()}, str(path))
    with pytest.raises(Exception, match="mismatched shapes"):
        zoo.load("ff_vit_micro", task="seg", backbone_checkpoint=str(path), **SMALL)
    seg = zoo.load("ff_vit_micro", task="seg", backbone_checkpoint=str(path), **dict(SMALL, img_size=32))
    torch.testing.assert_close(seg.backbone.trunk.blocks[1].mixer.fc1.weight, cls.blocks[1].mixer.fc1.weight)


def test_mmcv_ext_stand_in():
    code = """
import sys, types
from zoo.heads import _mmcv_compat
assert _mmcv_compat.install() is True
import mmseg.models  # imports mmcv.ops, which needs mmcv._ext
ext = sys.modules['mmcv._ext']
assert ext.__spec__ is not None and ext.__spec__.loader is None
try:
    ext.roi_align_forward(1)
except RuntimeError as e:
    assert 'roi_align_forward' in str(e) and 'mmcv' in str(e)
else:
    raise SystemExit('no error')
assert _mmcv_compat.install() is False  # idempotent
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    real = """
import sys, types
real = types.ModuleType('mmcv._ext')
sys.modules['mmcv._ext'] = real  # compiled ops present
from zoo.heads import _mmcv_compat
assert _mmcv_compat.install() is False and sys.modules['mmcv._ext'] is real
"""
    subprocess.run([sys.executable, "-c", real], check=True)


def _backbone(name, **kw):
    import zoo.heads.seg  # noqa: F401  (registers ZooViTBackbone after the mmcv stand-in is installed)
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    with DefaultScope.overwrite_default_scope("mmseg"):
        return MODELS.build(dict(type="ZooViTBackbone", name=name, **{"img_size": 56, "patch_size": 4, "in_chans": 1,
                                                                      **kw}))


def test_init_cfg_starts_the_trunk_from_a_pretrained_tag_at_init_weights_only():
    """mmseg-style ``init_cfg=dict(type='Pretrained', checkpoint=TAG)``: nothing is loaded when the model is built
    (a test run must not download), everything but head and final norm when the Runner calls init_weights."""
    cls = zoo.load("sa_vit_micro.cls_fmnist")  # the bundled 28x28 classifier: a 7x7 grid
    bb = _backbone("sa_vit_micro", init_cfg=dict(type="Pretrained", checkpoint="sa_vit_micro.cls_fmnist"))
    w = "blocks.1.mixer.qkv.weight"
    assert not torch.equal(bb.trunk.state_dict()[w], cls.state_dict()[w])
    bb.init_weights()
    own = bb.trunk.state_dict()
    for k, v in cls.state_dict().items():
        if k.startswith(("blocks.", "patch_embed.", "cls_token")):
            assert torch.equal(own[k], v), k
    assert own["pos_embed"].shape == (1, 1 + 14 * 14, 64) and torch.equal(own["pos_embed"][:, :1], cls.pos_embed[:, :1])
    before = _state(bb)
    bb.init_weights()  # a second call changes nothing
    assert _same(_state(bb), before)


def test_init_cfg_by_tag_or_by_folder_leaves_the_random_generator_alone():
    """Naming the start by tag builds the classifier first (its own random init); that must not move the global
    generator, or a training that names its start by tag draws other head weights and augmentations than the same
    recipe naming the folder (``make weights`` does). Both load the same trunk tensors (at the classifier's grid)."""
    trunks = {}
    for ck in ("sa_vit_micro.cls_fmnist", os.path.join(ROOT, "pretrained", "sa_vit_micro.cls_fmnist")):
        bb = _backbone("sa_vit_micro", img_size=28, init_cfg=dict(type="Pretrained", checkpoint=ck))
        torch.manual_seed(7)
        expected = torch.rand(3)
        torch.manual_seed(7)
        bb.init_weights()
        assert torch.equal(torch.rand(3), expected), ck
        trunks[ck] = bb.trunk.state_dict()
    assert _same(*trunks.values())


def test_init_cfg_skip_keeps_ff_token_mixing_fresh_and_loads_the_rest():
    cls = zoo.load("ff_vit_micro.cls_fmnist")  # 49 tokens; the backbone below has 196
    with pytest.raises(Exception, match="mismatched shapes"):
        _backbone("ff_vit_micro", init_cfg=dict(type="Pretrained", checkpoint="ff_vit_micro.cls_fmnist")).init_weights()
    bb = _backbone("ff_vit_micro", init_cfg=dict(type="Pretrained", checkpoint="ff_vit_micro.cls_fmnist",
                                                 skip=["blocks.*.mixer.*"]))
    fresh = {k: v.clone() for k, v in bb.trunk.state_dict().items()}
    bb.init_weights()
    own = bb.trunk.state_dict()
    mixing = [k for k in own if ".mixer." in k]
    assert mixing and all(torch.equal(own[k], fresh[k]) for k in mixing)
    channel = [k for k in cls.state_dict() if k.startswith("blocks.") and ".mixer." not in k]
    assert channel and all(torch.equal(own[k], cls.state_dict()[k]) for k in channel)
    assert own["pos_embed"].shape == (1, 1 + 14 * 14, 64)  # resampled, not left fresh
    assert not torch.equal(own["pos_embed"], fresh["pos_embed"])
    with pytest.raises(ValueError, match="matches no key"):
        _backbone("ff_vit_micro", init_cfg=dict(type="Pretrained", checkpoint="ff_vit_micro.cls_fmnist",
                                                skip=["blocks.*.attn.*"])).init_weights()


def test_a_grey_classifier_starts_a_colour_trunk_with_the_same_response_to_grey_images():
    """1 -> 3 input channels (the scenes recipe starts from the Fashion-MNIST classifiers): the kernel is repeated
    and divided by 3, so a grey image given as three equal channels embeds as the 1-channel image did."""
    cls = zoo.load("sa_vit_micro.cls_fmnist")
    bb = _backbone("sa_vit_micro", in_chans=3, init_cfg=dict(type="Pretrained", checkpoint="sa_vit_micro.cls_fmnist"))
    bb.init_weights()
    grey = torch.rand(2, 1, 56, 56)
    with torch.no_grad():
        want = F.conv2d(grey, cls.patch_embed.proj.weight.float(), cls.patch_embed.proj.bias.float(), stride=4)
        got = bb.trunk.patch_embed.proj(grey.expand(-1, 3, -1, -1))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    own = bb.trunk.state_dict()
    assert own["patch_embed.proj.weight"].shape == (64, 3, 4, 4)
    assert torch.equal(own["blocks.0.mixer.qkv.weight"], cls.state_dict()["blocks.0.mixer.qkv.weight"])
    # and back: a colour kernel for a grey trunk sums over channels
    colour = {k: v for k, v in bb.trunk.state_dict().items()}
    grey_bb = _backbone("sa_vit_micro")
    grey_bb.load_classification_checkpoint(colour)
    torch.testing.assert_close(grey_bb.trunk.patch_embed.proj.weight, own["patch_embed.proj.weight"].sum(1, True))
    with pytest.raises(ValueError, match=r"2 input channels.*in_chans=3.*only 1 -> C and C -> 1"):
        _backbone("sa_vit_micro", in_chans=3).load_classification_checkpoint(
            {**colour, "patch_embed.proj.weight": torch.zeros(64, 2, 4, 4)})


@pytest.mark.parametrize("mixer,size,skip", [("sa", "tiny", None), ("sa", "small", None), ("sa", "base", None),
                                             ("ff", "tiny", ["blocks.*.mixer.*"]), ("ff", "base", ["blocks.*.mixer.*"])])
@pytest.mark.parametrize("head", ["upernet", "segformerhead"])
def test_ade20k_configs_start_from_imagenet_weights(mixer, size, skip, head):
    from mmengine.config import Config
    cfg = Config.fromfile(f"configs/seg/{head}_{mixer}-vit-{size}_8xb2-160k_ade20k-512x512.py")
    init = cfg.model.backbone.init_cfg
    assert init.type == "Pretrained" and init.checkpoint == f"{mixer}_vit_{size}.cls_in1k"
    assert init.get("skip") == skip
    assert f"{mixer}_vit_{size}.cls_in1k" in zoo.list_pretrained()


@pytest.mark.parametrize("head", ["upernet", "segformerhead"])
@pytest.mark.parametrize("mixer", ["ea", "effa"])
def test_ade20k_configs_without_an_imagenet_start(mixer, head):
    """No ImageNet weights exist for ea/effa ViTs (EAMLP is a T2T-ViT): these start from scratch, as documented."""
    from mmengine.config import Config
    cfg = Config.fromfile(f"configs/seg/{head}_{mixer}-vit-base_8xb2-160k_ade20k-512x512.py")
    assert not cfg.model.backbone.get("init_cfg") and not cfg.model.backbone.get("checkpoint")


@pytest.mark.parametrize("head", ["uper", "segformer"])
def test_predict_without_logits_gives_the_same_labels(head):
    # test_cfg.return_logits=False (the seg configs' evaluation): pred_sem_seg from zoo.layers.resize_argmax on the
    # head's logits, never the full-size ones; the labels must be mmseg's (argmax of the resized logits) for plain
    # inputs, padded inputs, inputs resized by the test pipeline (two resizes) and flipped ones.
    from mmseg.structures import SegDataSample
    from tests.test_resize_argmax import assert_labels_of
    torch.manual_seed(0)
    model = zoo.load("ea_vit_micro", task="seg", decode_head=head, **dict(SMALL, aux_channels=0)).eval()
    x = torch.randn(4, 3, 64, 64)
    metas = [dict(img_shape=(64, 64), ori_shape=(64, 64), padding_size=[0, 0, 0, 0]),
             dict(img_shape=(54, 57), ori_shape=(54, 57), padding_size=[3, 4, 2, 8]),  # padded on every side
             dict(img_shape=(64, 64), ori_shape=(100, 90), padding_size=[0, 0, 0, 0]),  # the pipeline resized it
             dict(img_shape=(64, 64), ori_shape=(64, 64), padding_size=[0, 0, 0, 0], flip=True,
                  flip_direction="horizontal")]
    with torch.no_grad():
        reference = model.predict(x, [SegDataSample(metainfo=m) for m in metas])
        model.test_cfg.return_logits = False
        fast = model.predict(x, [SegDataSample(metainfo=m) for m in metas])
        bare = model.predict(x)  # no data samples: labels at the input size
    for ref, got in zip(reference, fast):
        assert "seg_logits" not in got and got.pred_sem_seg.data.shape == ref.pred_sem_seg.data.shape
        assert_labels_of(ref.seg_logits.data[None], got.pred_sem_seg.data)
    logits = model(x)
    assert_labels_of(logits, torch.cat([s.pred_sem_seg.data for s in bare]))


def test_predict_without_logits_after_slide_inference():
    from tests.test_resize_argmax import assert_labels_of
    torch.manual_seed(0)
    model = zoo.load("ff_vit_micro", task="seg", **SMALL).eval()
    x = torch.randn(1, 3, 100, 90)
    with torch.no_grad():
        logits = model(x)
        model.test_cfg.return_logits = False
        out = model.predict(x)
    assert_labels_of(logits, out[0].pred_sem_seg.data)


def _light_head(norm_cfg=dict(type="BN", requires_grad=True), channels=16, num_classes=7):
    import zoo.heads.seg  # noqa: F401  (installs the mmcv stand-in before mmseg is imported)
    from mmengine.registry import DefaultScope
    from mmseg.models.decode_heads import SegformerHead
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope("mmseg"):  # its loss comes from mmseg's registry
        head = SegformerHead(in_channels=[24] * 4, in_index=[0, 1, 2, 3], channels=channels,
                             num_classes=num_classes, norm_cfg=norm_cfg, align_corners=False)
    for m in head.modules():  # running statistics and affine terms far from the identity, so a missed fold shows
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1), m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 1.5), m.bias.data.uniform_(-0.5, 0.5)
    return head.eval()


@pytest.mark.parametrize("norm", ["BN", None])
def test_light_head_fused_inference_is_the_head(norm):
    # zoo.heads.light_head: the fusion conv (BN folded) per level before the resize must give the head's logits,
    # for levels whose sizes do not divide each other, and identical labels
    from zoo.heads.light_head import can_fuse, fused_forward
    head = _light_head(dict(type="BN", requires_grad=True) if norm else None)
    g = torch.Generator().manual_seed(1)
    feats = [torch.randn(2, 24, h, w, generator=g) for h, w in ((30, 22), (15, 11), (8, 6), (4, 3))]
    with torch.no_grad():
        assert can_fuse(head)
        ref, got = head.forward(feats), fused_forward(head, feats)
    assert got.shape == ref.shape == (2, 7, 30, 22)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert torch.equal(got.argmax(1), ref.argmax(1))


def test_light_head_fuses_only_where_nothing_can_notice(monkeypatch):
    import zoo.heads.light_head as light_head
    from zoo.heads.light_head import can_fuse
    head = _light_head()
    assert not can_fuse(head)  # autograd on: training graphs keep mmseg's forward
    with torch.no_grad():
        assert can_fuse(head)
        assert not can_fuse(head.train())
        head.eval()
        handle = head.fusion_conv.conv.register_forward_hook(lambda *a: None)  # a hook would not fire
        assert not can_fuse(head)
        handle.remove()
        assert can_fuse(head)
        assert not can_fuse(_light_head(dict(type="GN", num_groups=4)))  # not an affine map per channel
    # the segmentor takes the fused path at inference and mmseg's forward in training
    model = zoo.load("ea_vit_micro", task="seg", decode_head="segformer", **dict(SMALL, aux_channels=0)).eval()
    fused, hooked = [], []
    original = light_head.fused_forward
    monkeypatch.setattr(light_head, "fused_forward", lambda *a: fused.append(1) or original(*a))
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        model(x)
        assert fused == [1]
        model.decode_head.fusion_conv.register_forward_pre_hook(lambda *a: hooked.append(1))
        model(x)
    assert fused == [1] and hooked == [1]  # hooked: the segmentor fell back to the head's own forward


@pytest.mark.parametrize("aux_channels", [16, 0])  # with and without an auxiliary head
@pytest.mark.parametrize("head", ["uper", "segformer"])
def test_backbone_hands_channels_last_views_to_the_heads_that_take_them(head, aux_channels):
    # the zoo's necks and heads get the tokens as channels-last views (no copy), the same values; a head outside
    # CHANNELS_LAST_SAFE gets contiguous NCHW maps, the layout every mmseg head was written for
    from zoo.heads.seg import ZooEncoderDecoder
    model = zoo.load("ea_vit_micro", task="seg", decode_head=head, **dict(SMALL, aux_channels=aux_channels)).eval()
    assert model.with_auxiliary_head == bool(aux_channels)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        maps = model.backbone(x)
        assert model.backbone.channels_last_maps
        assert all(m.is_contiguous(memory_format=torch.channels_last) and not m.is_contiguous() for m in maps)
        model.backbone.channels_last_maps = False
        nchw = model.backbone(x)
        assert all(m.is_contiguous() for m in nchw) and all(torch.equal(a, b) for a, b in zip(maps, nchw))
    from mmengine.registry import DefaultScope
    with DefaultScope.overwrite_default_scope("mmseg"):  # the sub-modules come from mmseg's registry
        other = ZooEncoderDecoder(
            backbone=dict(type="ZooViTBackbone", name="ea_vit_micro", img_size=64, patch_size=8),
            decode_head=dict(type="EMAHead", in_channels=64, in_index=3, channels=16, ema_channels=16, num_bases=8,
                             num_stages=2, num_classes=5, loss_decode=dict(type="CrossEntropyLoss"))).eval()
    assert not other.backbone.channels_last_maps
    with torch.no_grad():
        assert all(m.is_contiguous() for m in other.backbone(x))
        assert other(x).shape == (1, 5, 64, 64)


def test_auxiliary_head_on_an_extra_map_at_the_token_grid():
    # out_indices names the last block twice and the neck keeps the extra copy at scale 1: the decode head reads the
    # first four maps, the FCN auxiliary head (aux_index=4) the last block at the trunk's own stride
    from zoo.hub import build_from_config
    from zoo.registry import build
    kw = dict(num_classes=5, img_size=64, patch_size=4, channels=32, aux_channels=16, out_indices=[0, 1, 2, 3, 3],
              neck_scales=[1, 0.5, 0.25, 0.125, 1], aux_index=4)
    model = build("ea_vit_micro", task="seg", **kw)
    assert model.auxiliary_head.in_index == 4 and list(model.decode_head.in_index) == [0, 1, 2, 3]
    assert len(model.decode_head.in_channels) == 4 and len(model.neck.lateral_convs) == 5
    x = torch.randn(2, 3, 64, 64)
    seen = {}

    def record(key):
        def hook(module, args):
            seen.setdefault(key, tuple(args[0].shape))
        return hook
    model.auxiliary_head.convs.register_forward_pre_hook(record("aux"))
    model.decode_head.lateral_convs[0].register_forward_pre_hook(record("head"))
    maps = model.extract_feat(x)
    assert [tuple(m.shape[-2:]) for m in maps] == [(16, 16), (8, 8), (4, 4), (2, 2), (16, 16)]
    # the extra map is the last block (the stride-32 map's source) before any rescale
    trunk_maps = model.backbone(x)
    assert torch.equal(trunk_maps[3], trunk_maps[4])
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    samples = []
    for _ in range(2):
        s = SegDataSample(metainfo=dict(img_shape=(64, 64), ori_shape=(64, 64), pad_shape=(64, 64)))
        s.gt_sem_seg = PixelData(data=torch.randint(0, 5, (1, 64, 64)))
        samples.append(s)
    losses = model.loss(x, samples)
    assert seen["aux"][-2:] == (16, 16) and seen["head"][-2:] == (16, 16)
    assert torch.isfinite(losses["aux.loss_ce"]) and torch.isfinite(losses["decode.loss_ce"])
    # a published folder records the layout and rebuilds the same model
    args = model.zoo_config["args"]
    assert (args["aux_index"], args["out_indices"], args["neck_scales"]) == (4, [0, 1, 2, 3, 3], kw["neck_scales"])
    again = build_from_config(model.zoo_config)
    again.load_state_dict(model.state_dict())
    model.eval(), again.eval()
    with torch.no_grad():
        assert torch.equal(model(x), again(x))
    assert "aux_index" not in build("ea_vit_micro", task="seg", **SMALL).zoo_config["args"]  # mmseg's 3: not recorded


@pytest.mark.parametrize("kw, message", [
    (dict(out_indices=[0, 1, 2, 3, 3]), "need neck_scales with 5 factors"),
    (dict(aux_index=4), "aux_index=4 names no map: the trunk returns 4"),
    (dict(neck_scales=[1, 1, 1, 1, 1]), r"one factor per trunk map \(4\)"),
    (dict(out_indices=[0, 1, 2]), "needs at least 4 trunk maps"),
    (dict(decode_head="segformer", out_indices=[0, 1, 2, 3, 3], neck_scales=[2, 1, 0.5, 0.25, 1]),
     "segformer head needs 4 trunk maps"),
])
def test_map_layout_errors_say_what_is_missing(kw, message):
    from zoo.registry import build
    with pytest.raises(ValueError, match=message):
        build("ea_vit_micro", task="seg", **{**SMALL, **kw})
