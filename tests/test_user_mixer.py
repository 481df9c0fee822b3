"""A user adds a mixer without editing the zoo's tables: as a class given to the trunk (like timm's attn_layer), or
registered under a code so that every task builds ``{code}_vit_{size}``; its metadata reaches the cards."""
import pytest
import torch
import torch.nn as nn

import zoo
from zoo import mixers, registry
from zoo.backbones.vit import VisionTransformer


class MeanMixer(nn.Module):
    """Token mixing by the mean over tokens (a PoolFormer-like toy), projected."""

    code = "mean"
    paper = "A test mixer"
    arxiv = None
    summary = "each token gets the projected mean of all tokens"
    citation = None

    def __init__(self, dim, num_heads, num_tokens=None):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x.mean(1, keepdim=True).expand_as(x))


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(mixers, "MIXERS", dict(mixers.MIXERS))
    monkeypatch.setattr(registry, "MODELS", dict(registry.MODELS))
    return registry.register_mixer(MeanMixer)


def test_trunk_takes_a_mixer_class():
    model = VisionTransformer(mixer=MeanMixer, img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32,
                              depth=2, num_heads=2)
    assert isinstance(model.blocks[0].mixer, MeanMixer)
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)


@pytest.mark.parametrize("task, kwargs, shape", [
    ("cls", dict(num_classes=10, img_size=28, in_chans=1, patch_size=4), (2, 10)),
    ("pcls", dict(num_classes=5, num_points=128, k=8), (2, 5)),
])
def test_registered_mixer_builds_for_tasks(registered, task, kwargs, shape):
    assert "mean_vit_micro" in registered and "mean_vit_micro" in zoo.list_models("mean_*")
    model = zoo.load("mean_vit_micro", task=task, **kwargs).eval()
    x = torch.randn(2, 1, 28, 28) if task == "cls" else torch.randn(2, 128, 3)
    with torch.no_grad():
        assert model(x).shape == shape
    assert zoo.list_mixers()["mean"] == "A test mixer"


def test_registered_mixer_reaches_the_card(registered, tmp_path):
    model = zoo.load("mean_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4)
    zoo.save_pretrained(model, tmp_path, metrics={"top1": 50.0})
    card = (tmp_path / "README.md").read_text()
    assert "token-mixer-mean" in card and "each token gets the projected mean of all tokens" in card
    assert torch.equal(zoo.load(f"local-dir:{tmp_path}").blocks[0].mixer.proj.weight, model.blocks[0].mixer.proj.weight)


def test_codes_are_checked(registered):
    with pytest.raises(ValueError, match="taken by MeanMixer"):
        mixers.register(type("Other", (MeanMixer,), {}), "mean")
    with pytest.raises(ValueError, match="no '_'"):
        mixers.register(MeanMixer, "my_mixer")
