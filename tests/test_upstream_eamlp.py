"""EANet's EAMLP-7 (T2T-ViT-7 + external attention) in its official layout loads into the zoo's ``ea_t2t_7``.

The reference model below is written in this file from the official ``EAMLP/models/{t2t_vit,token_performer,
transformer_block}.py`` (MenghaoGuo/EANet) module names and shapes, not from the zoo: ``tokens_to_token``
(``soft_split`` unfolds 7/4/2, 3/2/1, 3/2/1; ``attention1/2`` are the "Token_performer" modules, which in EAMLP are
external attention: ``q_linear``, ``linear_0`` (no bias, 128 slots), ``linear_1``, ``proj``, residual on the
projected token; ``norm1``, ``norm2``, ``mlp`` of ratio 1), ``project``, ``cls_token``, a fixed sinusoid ``pos_embed``,
7 blocks whose ``attn`` is multi-head EA (``trans_dims`` C -> 4C, 4h heads, ``linear_0``/``linear_1`` with 64 slots,
``proj`` 4C -> C), MLP ratio 2, nn.LayerNorm's eps 1e-5 everywhere, ``norm``, ``head`` on the cls token. Random
weights are saved as the released file is (a timm CheckpointSaver dict whose evaluation used ``state_dict_ema``).
"""
import argparse
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from zoo.backbones.t2t import sinusoid_table
from zoo.convert import CheckpointError, load_checkpoint
from zoo.heads import cls

E, DEPTH, HEADS, MLP_RATIO, TOKEN_DIM = 256, 7, 4, 2.0, 64  # T2t_vit_7
IMG = 384  # EAMLP_7_384


def sinusoid_np(n, d):
    """The table of the official ``get_sinusoid_encoding``: numpy float64, then float32."""
    angles = np.array([[pos / np.power(10000, 2 * (j // 2) / d) for j in range(d)] for pos in range(n)])
    angles[:, 0::2] = np.sin(angles[:, 0::2])
    angles[:, 1::2] = np.cos(angles[:, 1::2])
    return torch.FloatTensor(angles).unsqueeze(0)


class RefMlp(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class RefTokenAttention(nn.Module):
    """EAMLP ``token_performer.Attention``: external attention from ``dim`` patch vectors to ``in_dim`` tokens."""

    def __init__(self, dim, in_dim, k=128):
        super().__init__()
        self.q_linear = nn.Linear(dim, in_dim)
        self.linear_0 = nn.Linear(in_dim, k, bias=False)
        self.linear_1 = nn.Linear(k, in_dim)
        self.proj = nn.Linear(in_dim, in_dim)

    def forward(self, x):
        x = self.q_linear(x)
        a = torch.einsum("bnc,kc->bnk", x, self.linear_0.weight)
        a = torch.exp(a - a.max(dim=1, keepdim=True).values)
        a = a / a.sum(dim=1, keepdim=True)  # softmax over the token axis
        a = a / (1e-9 + a.sum(dim=2, keepdim=True))  # l1 over the slots
        return x + self.proj(self.linear_1(a))


class RefTokenPerformer(nn.Module):
    def __init__(self, dim, in_dim):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim), RefTokenAttention(dim, in_dim)
        self.norm2, self.mlp = nn.LayerNorm(in_dim), RefMlp(in_dim, in_dim)

    def forward(self, x):
        x = self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class RefT2TModule(nn.Module):
    def __init__(self, in_chans=3):
        super().__init__()
        self.attention1 = RefTokenPerformer(in_chans * 7 * 7, TOKEN_DIM)
        self.attention2 = RefTokenPerformer(TOKEN_DIM * 3 * 3, TOKEN_DIM)
        self.project = nn.Linear(TOKEN_DIM * 3 * 3, E)

    def forward(self, x):
        x = nn.Unfold(kernel_size=(7, 7), stride=(4, 4), padding=(2, 2))(x).transpose(1, 2)
        x = self.attention1(x)
        B, n, C = x.shape
        side = int(math.sqrt(n))  # the official module assumes square inputs
        x = nn.Unfold(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))(x.transpose(1, 2).reshape(B, C, side, side))
        x = self.attention2(x.transpose(1, 2))
        B, n, C = x.shape
        side = int(math.sqrt(n))
        x = nn.Unfold(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))(x.transpose(1, 2).reshape(B, C, side, side))
        return self.project(x.transpose(1, 2))


class RefEA(nn.Module):
    """EAMLP ``transformer_block.Attention``: multi-head external attention (coef 4, k = 256 // 4 = 64)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads * 4
        self.trans_dims = nn.Linear(dim, dim * 4)
        self.linear_0 = nn.Linear(dim * 4 // self.heads, 64)
        self.linear_1 = nn.Linear(64, dim * 4 // self.heads)
        self.proj = nn.Linear(dim * 4, dim)

    def forward(self, x):
        B, N, C = x.shape
        x = self.trans_dims(x).reshape(B, N, self.heads, -1)  # (B, N, H, d)
        a = self.linear_0(x).softmax(dim=1)  # (B, N, H, 64), softmax over tokens
        a = a / (1e-9 + a.sum(dim=-1, keepdim=True))
        return self.proj(self.linear_1(a).reshape(B, N, -1))


class RefBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(E), RefEA(E, HEADS)
        self.norm2, self.mlp = nn.LayerNorm(E), RefMlp(E, int(E * MLP_RATIO))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class RefEAMLP(nn.Module):
    """``T2T_ViT(tokens_type='performer', embed_dim=256, depth=7, num_heads=4, mlp_ratio=2)`` of EAMLP, eval mode."""

    def __init__(self, img=IMG, classes=1000):
        super().__init__()
        self.tokens_to_token = RefT2TModule()
        n = (img // 16) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, E))
        self.pos_embed = nn.Parameter(sinusoid_np(n + 1, E), requires_grad=False)
        self.blocks = nn.ModuleList(RefBlock() for _ in range(DEPTH))
        self.norm, self.head = nn.LayerNorm(E), nn.Linear(E, classes)

    def forward(self, x):
        x = self.tokens_to_token(x)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


def _randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == "pos_embed":
                continue  # the fixed table, never trained
            if p.ndim >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / p[0].numel() ** 0.5)
            elif name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return model.eval()


def save_timm_checkpoint(model, ema, path):
    """What timm's CheckpointSaver writes (model_best.pth.tar): both weight sets, optimizer, args, metric."""
    args = argparse.Namespace(model="T2t_vit_7", img_size=IMG, model_ema=True, model_ema_decay=0.99996, lr=1e-3)
    torch.save(dict(epoch=309, arch="T2t_vit_7", state_dict=model.state_dict(), state_dict_ema=ema.state_dict(),
                    optimizer=dict(state={}, param_groups=[dict(lr=1e-5, params=[])]), version=2, args=args,
                    metric=71.658), path)
    return path


def ea_t2t_7(**kwargs):
    """The model the registry names ``ea_t2t_7`` (built through the classification head's builder)."""
    model = cls.build("ea_t2t_7", mixer="ea", size="7", **kwargs)
    model.zoo_config = dict(name="ea_t2t_7", task="cls", args=kwargs)
    return model


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    ref, ema = _randomize(RefEAMLP(), seed=0), _randomize(RefEAMLP(), seed=1)
    path = save_timm_checkpoint(ref, ema, tmp_path_factory.mktemp("eamlp") / "model_best.pth.tar")
    return ref, ema, path


def _images(n=1, size=IMG, seed=2):
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(seed))


def test_sinusoid_table_is_the_official_one():
    torch.testing.assert_close(sinusoid_table(577, E), sinusoid_np(577, E), atol=1e-7, rtol=0)


def test_eamlp_logits_match_with_the_ema_weights(released):
    ref, ema, path = released
    model = ea_t2t_7(img_size=IMG).eval()
    load_checkpoint(model, path, layout="eamlp_t2t", key="state_dict_ema")
    assert len(model.state_dict()) == len(ema.state_dict()) == 150
    x = _images()
    with torch.no_grad():
        expected = ema(x)
        torch.testing.assert_close(model(x), expected, atol=1e-5, rtol=0)
        assert (expected - ref(x)).abs().max() > 1e-2  # the EMA weights, not the training weights, were loaded
    # without a key the first wrapper, ``state_dict`` (the training weights), is taken
    plain = load_checkpoint(ea_t2t_7(img_size=IMG).eval(), path)
    with torch.no_grad():
        torch.testing.assert_close(plain(x), ref(x), atol=1e-5, rtol=0)


def test_eamlp_at_another_input_size(released, tmp_path):
    """224 inputs: the official model built for 224 has the 224 sinusoid table; the zoo model gives its logits both
    when built for 224 (the converter swaps the fixed table) and when built for 384 and fed 224."""
    _, ema, path = released
    ref224 = RefEAMLP(img=224).eval()
    sd = dict(ema.state_dict(), pos_embed=ref224.pos_embed.detach())
    ref224.load_state_dict(sd)
    x = _images(n=2, size=224)
    built224 = load_checkpoint(ea_t2t_7(img_size=224).eval(), path, key="state_dict_ema")
    built384 = load_checkpoint(ea_t2t_7(img_size=IMG).eval(), path, key="state_dict_ema")
    with torch.no_grad():
        expected = ref224(x)
        torch.testing.assert_close(built224(x), expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(built384(x), expected, atol=1e-5, rtol=0)


def test_eamlp_wrong_files_are_refused(released, tmp_path):
    _, ema, path = released
    import zoo
    with pytest.raises(CheckpointError, match=r"model_best.pth.tar.*\*_t2t_\* classifiers"):
        zoo.load("ea_vit_tiny", checkpoint=path)
    sd = dict(ema.state_dict())
    sd["blocks.0.attn.gamma"] = torch.ones(1)  # a key no rule knows
    bad = tmp_path / "extra_key.pth"
    torch.save({"state_dict_ema": sd}, bad)
    with pytest.raises(CheckpointError, match=r"extra_key.pth.*blocks.0.attn.gamma"):
        load_checkpoint(ea_t2t_7(img_size=IMG), bad, key="state_dict_ema")
    sd = dict(ema.state_dict(), pos_embed=torch.randn(1, 197, E))  # a learned table cannot be rebuilt for 384
    learned = tmp_path / "learned_pos.pth"
    torch.save({"state_dict": sd}, learned)
    with pytest.raises(CheckpointError, match=r"learned_pos.pth.*not the fixed sinusoid"):
        load_checkpoint(ea_t2t_7(img_size=IMG), learned)
    with pytest.raises(CheckpointError, match=r"model_best.pth.tar \(torch file, weights_only\): the checkpoint has no "
                                              r"entry 'model_ema'"):
        load_checkpoint(ea_t2t_7(img_size=IMG), path, key="model_ema")
    with pytest.raises(CheckpointError, match=r"head.weight: checkpoint \(1000, 256\) vs model \(10, 256\)"):
        load_checkpoint(ea_t2t_7(img_size=IMG, num_classes=10), path, key="state_dict_ema")
