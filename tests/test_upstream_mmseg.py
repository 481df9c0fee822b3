"""mmseg's UPerNet + DeiT checkpoints load into the zoo's ``sa_vit_*`` segmentor and give mmseg's logits.

The reference is mmseg's own ``EncoderDecoder``, built by mmseg's registry from the config files the installed
mmseg ships (``.mim/configs/vit/``: the ``_mln_`` configs behind the reported 43.82 / 45.46 mIoU, and the ``-ln_mln``
one with ``final_norm=True``). Changed for the test only: the image size (64 instead of 512, so 4x4 patches), SyncBN
-> BN (same keys; SyncBN needs a process group), no pretrained path, and random weights. The state dict is saved
as mmseg saves it (``{'meta', 'state_dict', 'optimizer'}``) and read back through ``zoo.load(checkpoint=...)``.
"""
import os
import subprocess
import sys

import pytest
import torch

import zoo
import zoo.heads.seg  # noqa: F401  (installs the mmcv._ext stand-in before mmseg is imported below)
from zoo.convert import CheckpointError, load_checkpoint

import mmseg  # noqa: E402
from mmengine.config import Config  # noqa: E402
from mmengine.registry import DefaultScope  # noqa: E402
from mmseg.registry import MODELS  # noqa: E402

IMG = 64
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(os.path.dirname(mmseg.__file__), ".mim", "configs", "vit")
S16_MLN = "vit_deit-s16_mln_upernet_8xb2-160k_ade20k-512x512.py"  # 43.82 mIoU upstream
S16_LN_MLN = "vit_deit-s16-ln_mln_upernet_8xb2-160k_ade20k-512x512.py"  # final_norm=True


def _randomize(model, seed):
    """Weights of realistic scale (1/sqrt(fan_in)), LayerNorm/BN affine near 1, BN running stats away from 0/1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5)
            elif name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for name, b in model.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            elif name.endswith("running_var"):
                b.copy_(0.5 + torch.rand(b.shape, generator=g))
    return model.eval()


def mmseg_model(config, patch_bias=False, seed=0, heads=None, **backbone):
    """mmseg's segmentor from its shipped config, at IMG x IMG, BN instead of SyncBN, random weights.

    ``backbone`` overrides backbone arguments; ``heads`` = dict(channels, aux_channels, num_classes) shrinks the neck
    and heads to the backbone's width (for micro-sized files)."""
    cfg = Config.fromfile(os.path.join(CONFIG_DIR, config)).model
    cfg.pretrained = None
    cfg.backbone.img_size = (IMG, IMG)
    cfg.backbone.patch_bias = patch_bias  # mmseg 1.x builds none; the released 0.x checkpoints carry one
    cfg.backbone.update(backbone)
    if heads:
        e = cfg.backbone.embed_dims
        cfg.neck.update(in_channels=[e] * 4, out_channels=e)
        cfg.decode_head.update(in_channels=[e] * 4, channels=heads["channels"], num_classes=heads["num_classes"])
        cfg.auxiliary_head.update(in_channels=e, channels=heads["aux_channels"], num_classes=heads["num_classes"])
    cfg.data_preprocessor.size = cfg.backbone.img_size
    for head in (cfg.decode_head, cfg.auxiliary_head):
        head.norm_cfg = dict(type="BN", requires_grad=True)
    with DefaultScope.overwrite_default_scope("mmseg"):
        model = MODELS.build(cfg)
    return _randomize(model, seed)


def save_mmseg(model, path):
    """What mmseg's CheckpointHook writes: meta, the state dict, the optimizer state."""
    meta = dict(mmseg_version="0.14.1", iter=160000, seed=0, exp_name="upernet_deit.py", env_info="sys.platform: linux",
                CLASSES=("wall", "building", "sky"), PALETTE=[[120, 120, 120], [180, 120, 120], [6, 230, 230]])
    optimizer = dict(state={0: dict(step=torch.tensor(1.0))}, param_groups=[dict(lr=6e-5, params=[0])])
    torch.save(dict(meta=meta, state_dict=model.state_dict(), optimizer=optimizer), path)
    return path


def _metas(x):
    shape = tuple(x.shape[-2:])
    return [dict(ori_shape=shape, img_shape=shape, pad_shape=shape, padding_size=[0, 0, 0, 0])] * x.shape[0]


def _inputs(h, w, seed=1):
    return torch.randn(2, 3, h, w, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def s16(tmp_path_factory):
    ref = mmseg_model(S16_MLN, seed=0)
    return ref, save_mmseg(ref, tmp_path_factory.mktemp("mmseg") / "upernet_deit-s16_mln_512x512_160k_ade20k.pth")


@pytest.mark.parametrize("config,patch_bias,with_cls_token", [(S16_MLN, False, True), (S16_LN_MLN, True, True),
                                                              (S16_MLN, True, False)])
def test_mmseg_logits_match(config, patch_bias, with_cls_token, tmp_path):
    ref = mmseg_model(config, patch_bias=patch_bias, seed=3, with_cls_token=with_cls_token)
    path = save_mmseg(ref, tmp_path / "mmseg.pth")
    # the arch args that reproduce the config: final_norm as the config's, with_cls_token -> class_token
    model = zoo.load("sa_vit_small", task="seg", num_classes=150, img_size=IMG, final_norm=ref.backbone.final_norm,
                     class_token=with_cls_token, padded_logits="stretch", checkpoint=path).eval()
    for h, w in ((IMG, IMG), (72, 88)):  # 72x88: padded to 80x96 inside the backbone, position embedding resized
        x = _inputs(h, w)
        with torch.no_grad():
            expected = ref.inference(x, _metas(x))
            got = model(x)
        assert got.shape == expected.shape == (2, 150, h, w)
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=0)


def test_mmseg_checkpoint_state_dict_counts(s16):
    ref, path = s16
    model = zoo.load("sa_vit_small", task="seg", num_classes=150, img_size=IMG, padded_logits="stretch")
    load_checkpoint(model, path, layout="mmseg_vit")
    got, src = model.state_dict(), ref.state_dict()
    # every tensor of mmseg's model has its counterpart; the one added is the zero patch bias (mmseg 1.x has none)
    assert len(got) == len(src) + 1
    assert torch.equal(got["backbone.trunk.patch_embed.proj.bias"], torch.zeros(384))
    heads = [k for k in src if not k.startswith("backbone.")]
    assert len(heads) == len([k for k in got if not k.startswith("backbone.")]) == 98
    for k in heads:  # neck, UPerHead and FCN head are mmseg's own modules: same names, same tensors
        assert torch.equal(got[k], src[k]), k
    for i in (0, 11):
        assert torch.equal(got[f"backbone.trunk.blocks.{i}.mixer.qkv.weight"],
                           src[f"backbone.layers.{i}.attn.attn.in_proj_weight"])
        assert torch.equal(got[f"backbone.trunk.blocks.{i}.mlp.fc2.bias"], src[f"backbone.layers.{i}.ffn.layers.1.bias"])


def test_padding_mode_matters_for_mmseg_parity(s16):
    """Why ``padded_logits='stretch'`` is in the tag's args: the zoo's default crop differs on padded inputs."""
    ref, path = s16
    crop = zoo.load("sa_vit_small", task="seg", num_classes=150, img_size=IMG, checkpoint=path).eval()
    x = _inputs(72, 88)
    with torch.no_grad():
        diff = (crop(x) - ref.inference(x, _metas(x))).abs().max().item()
    assert diff > 1e-3


def test_mmseg_into_the_wrong_model_is_refused(s16):
    _, path = s16
    with pytest.raises(CheckpointError, match=r"upernet_deit-s16.*sa_vit_\* segmentors only"):
        zoo.load("ea_vit_small", task="seg", num_classes=150, img_size=IMG, checkpoint=path)
    with pytest.raises(CheckpointError, match=r"upernet_deit-s16.*task='seg'"):
        zoo.load("sa_vit_small", num_classes=150, img_size=IMG, checkpoint=path)
    with pytest.raises(CheckpointError, match=r"without mmseg's final_norm.*final_norm=False"):
        zoo.load("sa_vit_small", task="seg", num_classes=150, img_size=IMG, final_norm=True, checkpoint=path)
    with pytest.raises(CheckpointError, match=r"decode_head.conv_seg.weight: checkpoint \(150, 512, 1, 1\) vs model "
                                              r"\(19, 512, 1, 1\)"):
        zoo.load("sa_vit_small", task="seg", num_classes=19, img_size=IMG, checkpoint=path)
    with pytest.raises(CheckpointError, match=r"upernet_deit-s16.*mmseg UPerNet \+ ViT.*not the expected FF-only"):
        load_checkpoint(zoo.load("ff_vit_tiny"), path, layout="ff_official")


def test_convert_tool_writes_the_zoo_folder(s16, tmp_path):
    ref, path = s16
    out = tmp_path / "converted"
    cmd = [sys.executable, os.path.join(REPO, "tools", "convert.py"), str(path), "--to", "sa_vit_small", "--task",
           "seg", "--num-classes", "150", "--img-size", str(IMG), "--set", "padded_logits=stretch", "--layout",
           "mmseg_vit", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "(mmseg_vit layout) -> sa_vit_small" in r.stdout
    model = zoo.load("sa_vit_small", task="seg", num_classes=150, img_size=IMG, padded_logits="stretch",
                     checkpoint=out / "model.safetensors").eval()
    x = _inputs(72, 88)
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref.inference(x, _metas(x)), atol=1e-4, rtol=0)
