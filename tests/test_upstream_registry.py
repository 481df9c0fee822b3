"""The upstream tags in the registry: each builds the architecture its authors published (parameter counts), is
marked as reported upstream, and ``zoo.load(tag)`` goes through the download-and-convert path."""
from contextlib import contextmanager

import pytest
import torch

import zoo
from zoo import hub, pretrained, registry
from zoo.pretrained import PretrainedCfg

from .test_upstream_download import FileServer, eamlp_small

UPSTREAM = pretrained.upstream_entries()


@pytest.mark.parametrize("tag", [pytest.param(t, marks=pytest.mark.slow) if "_base." in t else t
                                 for t in sorted(UPSTREAM)])  # base models take ~10-40 s to initialise on a CPU
def test_upstream_tag_builds_the_published_architecture(tag):
    e = registry.PRETRAINED[tag]
    assert e is UPSTREAM[tag] or e == UPSTREAM[tag]
    assert e.metrics_source.startswith("reported upstream, not measured here") and e.metrics and e.converter
    assert (e.url or e.hf_hub_id) and e.license
    assert e.citation and e.citation.lstrip().startswith("@")  # the weights' own paper(s), BibTeX
    model = registry.build(e.model, task=e.task, **e.args)
    assert sum(p.numel() for p in model.parameters()) == e.num_params
    if e.url and "-" in e.file and e.sha256:  # torch.hub's name-<sha256 prefix>.pth convention
        assert e.file.rsplit("-", 1)[1].startswith(e.sha256)


def test_pretrained_true_picks_the_upstream_tag():
    assert registry.find_pretrained("sa_vit_base", "seg") == "sa_vit_base.seg_ade20k"
    assert registry.find_pretrained("ff_vit_tiny", "cls") == "ff_vit_tiny.cls_in1k"
    with pytest.raises(ValueError, match="ea_vit_base has no pretrained weights for task 'seg'"):
        registry.find_pretrained("ea_vit_base", "seg")


@contextmanager
def served_eamlp_tag(tmp_path, monkeypatch, seed):
    """``ea_t2t_7.cls_in1k`` pointed at a small EAMLP served on 127.0.0.1 (64 px, an empty Hub cache under
    ``tmp_path``); yields ``(official model, registry entry)`` while the server runs."""
    ema, data = eamlp_small(tmp_path, seed=seed)
    server = FileServer()
    try:
        url = server.serve("/model_best.pth.tar", data)
        entry = PretrainedCfg.from_dict({**UPSTREAM["ea_t2t_7.cls_in1k"].to_dict(), "url": url,
                                         "args": dict(num_classes=1000, img_size=64), "input_size": [3, 64, 64]})
        monkeypatch.setitem(registry.PRETRAINED, entry.tag, entry)
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield ema, entry
    finally:
        server.stop()


def test_load_routes_an_upstream_tag_through_download_and_conversion(tmp_path, monkeypatch):
    with served_eamlp_tag(tmp_path, monkeypatch, seed=7) as (ema, _):
        model = zoo.load("ea_t2t_7", pretrained=True).eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(x), ema(x), atol=1e-5, rtol=0)
    assert model.pretrained_cfg["tag"] == "ea_t2t_7.cls_in1k"
    assert model.pretrained_cfg["metrics_source"].startswith("reported upstream")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # converted once: offline, from the safetensors cache
    again = zoo.load("ea_t2t_7.cls_in1k").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(x), ema(x), atol=1e-5, rtol=0)


def test_offline_without_cache_names_the_source(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(Exception, match="linear-tiny-checkpoint.pth") as err:
        zoo.load("ff_vit_tiny", pretrained=True)
    assert isinstance(err.value, (hub.HubError, RuntimeError))


def test_publish_republishes_a_converted_upstream_tag(tmp_path, monkeypatch):
    """``tools/publish.py --pretrained TAG --no-upload``: the converted model in the zoo layout, loadable with
    ``local-dir:``, its card carrying the upstream licence, source, citation and "reported upstream" metrics."""
    import json
    import os

    from tests.load_tool import load_tool
    publish = load_tool("publish")
    out = tmp_path / "pub"
    with served_eamlp_tag(tmp_path, monkeypatch, seed=3) as (ema, entry):
        assert publish.main(["--pretrained", "ea_t2t_7.cls_in1k", "--repo-id", "me/ea_t2t_7", "--out", str(out),
                             "--no-upload"]) == 0
    url = entry.url
    assert sorted(os.listdir(out)) == ["README.md", "config.json", "model.safetensors"]
    model = zoo.load(f"local-dir:{out}").eval()
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(model(x), ema(x), atol=1e-5, rtol=0)
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["license"] == entry.license and cfg["metrics"] == entry.metrics
    assert cfg["upstream"]["url"] == url and cfg["upstream"]["metrics_source"].startswith("reported upstream")
    card = (out / "README.md").read_text()
    assert f"license: {entry.license}" in card and "reported upstream, not measured here" in card
    from zoo import mixers
    assert mixers.info("ea")["citation"].strip().splitlines()[0] in card and url in card  # EANet's paper
    # The entry's papers (EANet, then T2T-ViT, whose front end EAMLP uses), each cited once although EANet is
    # also the mixer's paper, and DeiT, which every card cites.
    keys = [line for line in card.splitlines() if line.startswith("@")]
    assert keys == ["@article{guo2021external,", "@inproceedings{yuan2021t2tvit,", "@inproceedings{touvron2021deit,"]
    with pytest.raises(SystemExit, match="not an upstream checkpoint"):
        publish.main(["--pretrained", "sa_vit_micro.cls_fmnist", "--repo-id", "me/x", "--no-upload"])
