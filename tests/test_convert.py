"""Checkpoint conversion: foreign layouts written and run here, loaded through ``zoo.load(..., checkpoint=)``.

Two reference models are written in this file from the papers' / official repos' descriptions (not from zoo):
a DeiT/timm-layout ViT and the FF-only official layout (``LinearVisionTransformer`` of
lukemelas/do-you-even-need-attention). Random weights are saved in their layouts (.pth wrapped or not, and
.safetensors); the zoo model loaded from the file must give the same logits. Dims are those of the registered
``tiny`` size (192 wide, 12 blocks, 3 heads) on 32x32 inputs to stay fast.
"""
import argparse
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

import zoo
from zoo.convert import CheckpointError, load_checkpoint

E, DEPTH, HEADS = 192, 12, 3  # registered "tiny"
IMG, PATCH, CLASSES = 32, 16, 10
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ln(d):
    return nn.LayerNorm(d, eps=1e-6)


class RefMlp(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class RefAttn(nn.Module):
    """timm ``Attention`` names; attention written out as softmax(q k^T / sqrt(d)) v."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, N, C = x.shape
        d = C // self.heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.reshape(B, N, self.heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
        a = torch.einsum("bhnd,bhmd->bhnm", q, k) / math.sqrt(d)
        y = torch.einsum("bhnm,bhmd->bhnd", a.softmax(-1), v)
        return self.proj(y.permute(0, 2, 1, 3).reshape(B, N, C))


class RefDeiTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = _ln(d), RefAttn(d, heads), _ln(d), RefMlp(d, 4 * d)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class RefDeiT(nn.Module):
    """DeiT / timm ViT layout (optionally distilled: ``dist_token``, ``head_dist``)."""

    def __init__(self, img=IMG, patch=PATCH, classes=CLASSES, distilled=False):
        super().__init__()
        g = img // patch
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, E, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, E))
        if distilled:
            self.dist_token = nn.Parameter(torch.zeros(1, 1, E))
        self.pos_embed = nn.Parameter(torch.zeros(1, (2 if distilled else 1) + g * g, E))
        self.blocks = nn.ModuleList(RefDeiTBlock(E, HEADS) for _ in range(DEPTH))
        self.norm, self.head = _ln(E), nn.Linear(E, classes)
        if distilled:
            self.head_dist = nn.Linear(E, classes)

    def features(self, x, grid=None):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)  # (B, gh*gw, E)
        prefix = 2 if hasattr(self, "dist_token") else 1
        pos = self.pos_embed
        if grid is not None:  # bicubic resampling of the patch rows, as timm does for another input size
            g0 = int(math.isqrt(pos.shape[1] - prefix))
            p = pos[:, prefix:].reshape(1, g0, g0, E).permute(0, 3, 1, 2)
            p = F.interpolate(p, size=grid, mode="bicubic", align_corners=False)
            pos = torch.cat([pos[:, :prefix], p.permute(0, 2, 3, 1).reshape(1, -1, E)], dim=1)
        toks = [self.cls_token.expand(len(x), -1, -1)]
        if prefix == 2:
            toks.append(self.dist_token.expand(len(x), -1, -1))
        x = torch.cat(toks + [x], dim=1) + pos
        for b in self.blocks:
            x = b(x)
        return self.norm(x)

    def forward(self, x, grid=None):
        return self.head(self.features(x, grid)[:, 0])


class RefLinearBlock(nn.Module):
    """FF official block: channel MLP (``norm1``, ``mlp1``) then token MLP (``norm2`` over N, ``mlp2``)."""

    def __init__(self, d, n):
        super().__init__()
        self.norm1, self.mlp1 = _ln(d), RefMlp(d, 4 * d)
        self.norm2, self.mlp2 = _ln(n), RefMlp(n, 4 * n)

    def forward(self, x):
        x = x + self.mlp1(self.norm1(x))
        x = x.transpose(1, 2)  # (B, E, N)
        x = x + self.mlp2(self.norm2(x))
        return x.transpose(1, 2)


class RefFF(nn.Module):
    """FF-only official layout: ``pos_encoding.pos_embed`` (1, E, gh, gw) and ``pos_encoding.cls_pos_embed``."""

    def __init__(self, img=IMG, patch=PATCH, classes=CLASSES):
        super().__init__()
        g = img // patch
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, E, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, E))
        self.pos_encoding = nn.Module()
        self.pos_encoding.pos_embed = nn.Parameter(torch.zeros(1, E, g, g))
        self.pos_encoding.cls_pos_embed = nn.Parameter(torch.zeros(1, 1, E))
        self.blocks = nn.ModuleList(RefLinearBlock(E, 1 + g * g) for _ in range(DEPTH))
        self.norm, self.head = _ln(E), nn.Linear(E, classes)

    def forward(self, x):
        x = self.patch_embed.proj(x)  # (B, E, gh, gw)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x.flatten(2).transpose(1, 2)], dim=1)
        pos = torch.cat([self.pos_encoding.cls_pos_embed, self.pos_encoding.pos_embed.flatten(2).transpose(1, 2)], 1)
        x = x + pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


def _randomize(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            base = 1.0 if (name.endswith("weight") and p.ndim == 1) else 0.0  # LayerNorm weights near 1
            p.copy_(base + 0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


def _images(n=2, size=IMG, seed=1):
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _save(sd, path, wrap=None, extra=None):
    sd = {k: v.detach().clone().contiguous() for k, v in sd.items()}
    if str(path).endswith(".safetensors"):
        save_file(sd, str(path))
    else:
        obj = {wrap: sd, **(extra or {})} if wrap else sd
        torch.save(obj, path)
    return path


@pytest.fixture(scope="module")
def deit():
    return _randomize(RefDeiT(), seed=0)


@pytest.fixture(scope="module")
def ff_ref():
    return _randomize(RefFF(), seed=2)


@pytest.mark.parametrize("fmt,wrap", [(".pth", None), (".pth", "model"), (".pth", "state_dict"),
                                      (".safetensors", None)])
def test_timm_vit_logits_match(deit, tmp_path, fmt, wrap):
    path = _save(deit.state_dict(), tmp_path / f"deit{fmt}", wrap=wrap)
    model = zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=path).eval()
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(model(x), deit(x), atol=1e-5, rtol=0)


def test_timm_vit_pos_embed_resampled_to_new_grid(deit, tmp_path):
    path = _save(deit.state_dict(), tmp_path / "deit.pth", wrap="model")
    model = zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=2 * IMG, checkpoint=path).eval()
    assert model.pos_embed.shape == (1, 1 + 16, E)
    x = _images(size=2 * IMG)
    with torch.no_grad():
        torch.testing.assert_close(model(x), deit(x, grid=(4, 4)), atol=1e-5, rtol=0)


@pytest.mark.parametrize("fmt,wrap", [(".pth", "model"), (".safetensors", None)])
def test_ff_official_logits_match(ff_ref, tmp_path, fmt, wrap):
    # The real release is a DeiT training checkpoint: weights under "model", plus argparse args and epoch.
    extra = dict(args=argparse.Namespace(model="linear_tiny", lr=5e-4), epoch=299)
    path = _save(ff_ref.state_dict(), tmp_path / f"linear-tiny-checkpoint{fmt}", wrap=wrap, extra=extra)
    model = zoo.load("ff_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=path).eval()
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(model(x), ff_ref(x), atol=1e-5, rtol=0)


def test_ff_official_other_token_count_is_refused(ff_ref, tmp_path):
    path = _save(ff_ref.state_dict(), tmp_path / "ff.pth", wrap="model")
    with pytest.raises(CheckpointError, match=r"N=5 tokens.*cannot be resampled"):
        zoo.load("ff_vit_tiny", num_classes=CLASSES, img_size=2 * IMG, checkpoint=path)


def test_zoo_safetensors_round_trip(tmp_path):
    src = zoo.load("ea_vit_micro", num_classes=CLASSES, img_size=IMG).eval()
    _randomize(src, seed=3)
    path = _save(src.state_dict(), tmp_path / "model.safetensors")
    dst = zoo.load("ea_vit_micro", num_classes=CLASSES, img_size=IMG, checkpoint=path).eval()
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(dst(x), src(x), atol=0, rtol=0)
    dst2 = zoo.load("ea_vit_micro", num_classes=CLASSES, img_size=IMG, checkpoint=tmp_path).eval()  # the folder
    with torch.no_grad():
        torch.testing.assert_close(dst2(x), src(x), atol=0, rtol=0)


def test_strict_errors_name_missing_and_unexpected_keys(deit, tmp_path):
    sd = dict(deit.state_dict())
    del sd["blocks.3.mlp.fc2.bias"]
    sd["blocks.0.attn.q_norm.weight"] = torch.ones(E)
    path = _save(sd, tmp_path / "bad.pth")
    with pytest.raises(CheckpointError) as e:
        zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=path)
    msg = str(e.value)
    assert "missing keys (1): blocks.3.mlp.fc2.bias" in msg
    assert "unexpected keys (1): blocks.0.mixer.q_norm.weight" in msg


def test_head_mismatch_is_an_error_unless_drop_head(tmp_path):
    ref = _randomize(RefDeiT(classes=1000), seed=4)
    path = _save(ref.state_dict(), tmp_path / "in1k.pth", wrap="model")
    msg = r"head\.weight: checkpoint \(1000, 192\) vs model \(10, 192\)(.|\n)*drop_head"
    with pytest.raises(CheckpointError, match=msg):
        zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=path)
    model = zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG).eval()
    head_before = model.head.weight.detach().clone()
    load_checkpoint(model, path, drop_head=True)
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(model.forward_features(x), ref.features(x), atol=1e-5, rtol=0)
    assert torch.equal(model.head.weight, head_before)
    # the same through zoo.load: checkpoint_options reach the converter
    via_load = zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=path,
                        checkpoint_options=dict(drop_head=True)).eval()
    with torch.no_grad():
        torch.testing.assert_close(via_load.forward_features(x), ref.features(x), atol=1e-5, rtol=0)


def test_wrong_mixer_is_refused(deit, ff_ref, tmp_path):
    p1 = _save(deit.state_dict(), tmp_path / "deit.pth")
    with pytest.raises(CheckpointError, match="sa_vit_\\* models only"):
        zoo.load("ea_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=p1)
    p2 = _save(ff_ref.state_dict(), tmp_path / "ff.pth")
    with pytest.raises(CheckpointError, match="ff_vit_\\* models only"):
        zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=p2)


def test_distilled_deit_needs_explicit_option(tmp_path):
    ref = _randomize(RefDeiT(distilled=True), seed=5)
    path = _save(ref.state_dict(), tmp_path / "deit_distilled.pth", wrap="model")
    with pytest.raises(CheckpointError, match="dist_token, head_dist.bias, head_dist.weight(.|\n)*drop_distillation"):
        zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=path)
    model = load_checkpoint(zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG), path,
                            drop_distillation=True).eval()
    # Expected: the same network with the distillation token removed (its pos row dropped), cls head only.
    plain = RefDeiT().eval()
    sd = {k: v for k, v in ref.state_dict().items() if k != "dist_token" and not k.startswith("head_dist")}
    sd["pos_embed"] = torch.cat([sd["pos_embed"][:, :1], sd["pos_embed"][:, 2:]], dim=1)
    plain.load_state_dict(sd)
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(model(x), plain(x), atol=1e-5, rtol=0)


def test_convert_tool_writes_and_refuses_overwrite(deit, tmp_path):
    src = _save(deit.state_dict(), tmp_path / "deit.pth", wrap="model")
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(REPO, "tools", "convert.py"), str(src), "--to", "sa_vit_tiny", "--out",
           str(out), "--num-classes", str(CLASSES), "--img-size", str(IMG)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 0, r.stderr
    weights = out / "model.safetensors"
    assert weights.is_file()
    model = zoo.load("sa_vit_tiny", num_classes=CLASSES, img_size=IMG, checkpoint=weights).eval()
    x = _images()
    with torch.no_grad():
        torch.testing.assert_close(model(x), deit(x), atol=1e-5, rtol=0)
    r2 = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    assert r2.returncode != 0 and "--force" in r2.stderr
