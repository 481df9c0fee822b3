"""Pretrained tags: the grammar, the typed entry, resolution (checkout folder -> Hub cache -> download), errors."""
import hashlib
import os
import subprocess
import sys

import pytest
import torch

import zoo
from zoo import cli, hub, pretrained, registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "ff_vit_micro.cls_fmnist"
MICRO = dict(num_classes=10, img_size=28, in_chans=1, patch_size=4)


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _out(model):
    x = torch.randn(2, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        return model.eval()(x)


@pytest.fixture
def bundled(tmp_path, monkeypatch):
    """A checkout folder pretrained/<TAG> with a registry entry pointing at it (and at an unreachable Hub)."""
    torch.manual_seed(0)
    model = zoo.load("ff_vit_micro", task="cls", **MICRO)
    cfg = zoo.save_pretrained(model, tmp_path / "pretrained" / TAG, metrics={"top1": 88.5}, tag=TAG)
    entry = pretrained.PretrainedCfg.from_published(cfg)
    monkeypatch.setattr(pretrained, "BUNDLED_DIR", str(tmp_path / "pretrained"))
    monkeypatch.setattr(registry, "PRETRAINED", {TAG: entry})  # only this tag: the real index cannot interfere
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens: a download attempt fails at once
    return model, entry, tmp_path / "pretrained" / TAG


# -- the tag grammar ----------------------------------------------------------------------------------------------
def test_parse_tag():
    assert pretrained.parse_tag("ea_vit_micro.seg_scenes") == pretrained.Tag("ea_vit_micro", "seg", "scenes")
    assert str(pretrained.parse_tag("EA_VIT_MICRO.SEG_SCENES")) == "ea_vit_micro.seg_scenes"
    assert pretrained.parse_tag("ea_t2t_7.cls_in1k").model == "ea_t2t_7"
    for bad in ("ea_vit_micro", "ea_vit_micro.seg", ".cls_fmnist", "ea_vit_micro.cls_"):
        with pytest.raises(ValueError, match="expected {model}.{task}_{dataset}"):
            pretrained.parse_tag(bad)


def test_entry_round_trip_and_validation():
    e = pretrained.PretrainedCfg(tag=TAG, hf_hub_id=f"zoo-models/{TAG}", sha256="a" * 64, input_size=(1, 28, 28),
                                 label_names=("a", "b"), metrics={"top1": 1.0})
    assert pretrained.PretrainedCfg.from_dict(e.to_dict()) == e
    assert (e.model, e.task) == ("ff_vit_micro", "cls")
    with pytest.raises(ValueError, match="canonical form"):
        pretrained.PretrainedCfg(tag="FF_vit_micro.cls_fmnist", hf_hub_id="x/y")
    with pytest.raises(ValueError, match="not hex"):
        pretrained.PretrainedCfg(tag=TAG, hf_hub_id="x/y", sha256="xyz")
    with pytest.raises(ValueError, match="unknown fields"):
        pretrained.PretrainedCfg.from_dict({**e.to_dict(), "colour": "red"})


# -- resolution -----------------------------------------------------------------------------------------------------
def test_bundled_folder_loads_offline_with_an_empty_cache(bundled):
    model, entry, _ = bundled
    for loaded in (zoo.load("ff_vit_micro", task="cls", pretrained=True), zoo.load(TAG),
                   zoo.load("FF_VIT_MICRO", task="CLS", pretrained=True)):
        assert torch.equal(_out(loaded), _out(model))
        cfg = loaded.pretrained_cfg
        assert cfg["tag"] == TAG and cfg["hf_hub_id"] == f"zoo-models/{TAG}" and cfg["input_size"] == [1, 28, 28]
        assert cfg["num_classes"] == 10 and cfg["label_names"][0] == "T-shirt/top" and cfg["metrics"] == {"top1": 88.5}
        assert cfg["dataset"] == "fmnist" and cfg["license"] and "source" in cfg


def test_bundled_folder_sha256_is_checked(bundled, monkeypatch):
    _, entry, _ = bundled
    wrong = pretrained.PretrainedCfg.from_dict({**entry.to_dict(), "sha256": "0" * 64})
    monkeypatch.setitem(registry.PRETRAINED, TAG, wrong)  # (the fixture's own dict)
    with pytest.raises(hub.ChecksumError, match="0{64}"):
        zoo.load(TAG)


def test_without_folder_or_cache_the_error_says_where_it_looked(bundled, monkeypatch, tmp_path):
    monkeypatch.setattr(pretrained, "BUNDLED_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubError, match=r"not in this checkout .* nor in the Hub cache.*not published on the Hub"):
        zoo.load(TAG)


def test_fresh_process_loads_a_bundled_checkpoint_offline(bundled, tmp_path):
    """The real registry path in a new process: HF_HUB_OFFLINE=1 and an empty Hugging Face cache."""
    if not pretrained.read_index():
        pytest.skip("no bundled checkpoints in this checkout")
    tag = sorted(pretrained.read_index())[0]
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), PYTHONPATH=ROOT)
    env.pop("HF_HUB_CACHE", None)
    script = f"import zoo; m = zoo.load({tag!r}); print(m.pretrained_cfg['tag'], m.pretrained_cfg['sha256'])"
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [tag, _sha(os.path.join(ROOT, "pretrained", tag, "model.safetensors"))]
    assert not os.path.exists(tmp_path / "hf" / "hub" / f"models--zoo-models--{tag}")


# -- errors -----------------------------------------------------------------------------------------------------------
def test_tag_and_task_must_agree(bundled):
    with pytest.raises(ValueError, match="holds cls weights, not seg"):
        zoo.load(TAG, task="seg")
    with pytest.raises(ValueError, match="no seg weights|has no pretrained weights for task 'seg'"):
        zoo.load("ff_vit_micro", task="seg", pretrained=True)
    with pytest.raises(ValueError, match="no pretrained weights 'ff_vit_micro.cls_mnist'.*Close matches"):
        zoo.load("ff_vit_micro.cls_mnist")


def test_published_folder_and_task_must_agree(bundled):
    _, _, folder = bundled
    assert zoo.load(f"local-dir:{folder}", task="classification").zoo_config["task"] == "cls"
    with pytest.raises(ValueError, match="is a cls checkpoint, not pcls"):
        zoo.load(f"local-dir:{folder}", task="pcls")


def test_names_are_case_insensitive_where_unambiguous():
    assert zoo.load("SA_VIT_MICRO", task="CLS", **MICRO).zoo_config["name"] == "sa_vit_micro"
    with pytest.raises(ValueError, match="unknown model 'sa_vit_mikro'.*sa_vit_micro"):
        zoo.load("sa_vit_mikro")


def test_cli_prints_the_pretrained_table(bundled, capsys):
    assert cli.main(["pretrained", "ff_*"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["tag", "params", "dataset", "metric", "from"]
    row = next(line for line in lines if line.startswith(TAG))
    assert "Fashion-MNIST" in row and "top1 88.5" in row and "measured here" in row
    n = sum(p.numel() for p in bundled[0].parameters())
    assert f"{n / 1e6:.2f}M" in row
