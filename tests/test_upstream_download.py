"""Upstream checkpoints through ``zoo.upstream``: download (plain URL or Hub), sha256, convert once, safetensors cache.

Plain URLs are served by a small ``http.server`` on 127.0.0.1 in a thread (``FileServer`` below: it counts requests
and can cut a response short); the Hub repo (DeiT's) by the Hub stand-in of ``tests/hub_server.py``. Each served
file is a small random checkpoint in an upstream layout, made by the reference models of the other conversion tests
(mmseg's own ``EncoderDecoder`` for mmseg; the official-name EAMLP and DeiT models) or, for the FF-only release, by
writing the official key names and shapes directly. Every cache lives under ``tmp_path``.
"""
import collections
import hashlib
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from safetensors.torch import save_file

import zoo
from zoo import upstream
from zoo.convert import CheckpointError, load_checkpoint
from zoo.upstream import UpstreamError

from tests.hub_server import HubServer, Repo
from tests.test_convert import RefDeiT, _randomize as randomize_deit
from tests.test_upstream_eamlp import RefEAMLP, _randomize as randomize_eamlp, ea_t2t_7, save_timm_checkpoint

MICRO_SEG = dict(num_classes=11, img_size=32, channels=64, aux_channels=32, padded_logits="stretch")


class FileServer:
    """Serves ``files`` ({url path: bytes}) over HTTP on 127.0.0.1; ``truncate`` ({path: n}) announces the full
    Content-Length but sends n bytes and closes; ``hits`` counts GETs per path."""

    def __init__(self):
        self.files, self.truncate, self.hits = {}, {}, collections.Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):  # keep test output clean
                return

            def do_GET(self):
                path = self.path.split("?")[0]
                server.hits[path] += 1
                data = server.files.get(path)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                cut = server.truncate.pop(path, None)
                self.wfile.write(data if cut is None else data[:cut])
                self.close_connection = cut is not None

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def serve(self, path, data):
        self.files[path] = bytes(data)
        return self.url(path)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server():
    s = FileServer()
    yield s
    s.stop()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A Hub cache under tmp_path (the zoo folder is its sibling); online unless a test says otherwise."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    return tmp_path / "hf" / "hub"


def _bytes(obj_or_path):
    with open(obj_or_path, "rb") as f:
        return f.read()


def sha8(data):
    return hashlib.sha256(data).hexdigest()[:8]


# -- small files in each upstream layout --------------------------------------------------------------------------
def mmseg_micro(tmp_path, seed=0):
    """mmseg's own segmentor, micro-sized (64 wide, 4 layers), saved as mmseg saves it; returns (model, bytes)."""
    from tests.test_upstream_mmseg import S16_MLN, mmseg_model, save_mmseg
    ref = mmseg_model(S16_MLN, seed=seed, embed_dims=64, num_layers=4, num_heads=2, out_indices=(0, 1, 2, 3),
                      img_size=(32, 32), heads=dict(channels=64, aux_channels=32, num_classes=11))
    return ref, _bytes(save_mmseg(ref, tmp_path / f"mmseg{seed}.pth"))


def ff_official_micro(tmp_path, seed=0):
    """The FF-only release layout (DeiT main.py container) for ff_vit_micro at 32x32 (E=64, 4 blocks, N=5)."""
    g = torch.Generator().manual_seed(seed)
    E, N, depth = 64, 5, 4
    shapes = {"cls_token": (1, 1, E), "pos_encoding.pos_embed": (1, E, 2, 2), "pos_encoding.cls_pos_embed": (1, 1, E),
              "patch_embed.proj.weight": (E, 3, 16, 16), "patch_embed.proj.bias": (E,), "norm.weight": (E,),
              "norm.bias": (E,), "head.weight": (1000, E), "head.bias": (1000,)}
    for i in range(depth):
        b = f"blocks.{i}"
        shapes.update({f"{b}.norm1.weight": (E,), f"{b}.norm1.bias": (E,), f"{b}.mlp1.fc1.weight": (4 * E, E),
                       f"{b}.mlp1.fc1.bias": (4 * E,), f"{b}.mlp1.fc2.weight": (E, 4 * E), f"{b}.mlp1.fc2.bias": (E,),
                       f"{b}.norm2.weight": (N,), f"{b}.norm2.bias": (N,), f"{b}.mlp2.fc1.weight": (4 * N, N),
                       f"{b}.mlp2.fc1.bias": (4 * N,), f"{b}.mlp2.fc2.weight": (N, 4 * N), f"{b}.mlp2.fc2.bias": (N,)})
    sd = {k: 0.1 * torch.randn(s, generator=g) for k, s in shapes.items()}
    path = tmp_path / f"linear-micro-checkpoint{seed}.pth"
    torch.save(dict(model=sd, model_ema=sd, epoch=299), path)
    return sd, _bytes(path)


def eamlp_small(tmp_path, seed=0):
    """EAMLP-7 in the official layout at 64x64 (17 tokens), as the released CheckpointSaver file."""
    ref, ema = randomize_eamlp(RefEAMLP(img=64), seed), randomize_eamlp(RefEAMLP(img=64), seed + 1)
    return ema, _bytes(save_timm_checkpoint(ref, ema, tmp_path / f"eamlp{seed}.pth.tar"))


def _entry(tag, url, converter, **extra):
    return dict(tag=tag, url=url, converter=converter, **extra)


def _micro_seg():
    return zoo.load("sa_vit_micro", task="seg", **MICRO_SEG).eval()


def _micro_ff():
    return zoo.load("ff_vit_micro", img_size=32).eval()


def _t2t():
    return ea_t2t_7(img_size=64).eval()


# -- the tests ----------------------------------------------------------------------------------------------------
def test_url_cache_root_is_next_to_the_hub_cache(cache):
    assert upstream.cache_root() == os.path.join(os.path.dirname(str(cache)), "zoo")
    assert upstream.expected_sha256("https://x/upernet_deit-s16_mln_512x512_160k_ade20k_20210621_161021-fb9a5dfb.pth") \
        == "fb9a5dfb"
    assert upstream.expected_sha256("https://x/linear-base-checkpoint.pth") is None
    assert upstream.expected_sha256("https://x/model_best.pth.tar") is None


@pytest.mark.parametrize("layout", ["mmseg_vit", "ff_official", "eamlp_t2t"])
def test_download_convert_once_then_offline_from_safetensors(layout, server, cache, tmp_path, monkeypatch):
    if layout == "mmseg_vit":
        ref, data = mmseg_micro(tmp_path)
        name, build, key = f"/mmseg/upernet_deit-micro_mln_20210621_161021-{sha8(data)}.pth", _micro_seg, None
    elif layout == "ff_official":
        ref, data = ff_official_micro(tmp_path)
        name, build, key = "/releases/download/v0.0.1/linear-micro-checkpoint.pth", _micro_ff, None
    else:
        ref, data = eamlp_small(tmp_path)
        name, build, key = "/EANet/raw/c4bb93b/EAMLP/EAMLP_7_384/model_best.pth.tar", _t2t, "state_dict_ema"
    entry = _entry(f"x_vit_micro.cls_{layout.replace('_', '')}", server.serve(name, data), layout,
                   state_dict_key=key)
    first = upstream.load_upstream(build(), entry)
    # the same as converting the local file directly
    local = tmp_path / os.path.basename(name)
    local.write_bytes(data)
    direct = load_checkpoint(build(), local, layout=layout, key=key)
    for k, v in direct.state_dict().items():
        assert torch.equal(first.state_dict()[k], v), k
    converted = first.pretrained_source["converted"]
    assert converted.startswith(str(tmp_path / "hf" / "zoo" / "converted")) and os.path.isfile(converted)
    with open(os.path.join(os.path.dirname(converted), "source.json")) as f:
        meta = json.load(f)
    assert meta["source_sha256"] == hashlib.sha256(data).hexdigest() and meta["converter"] == layout
    assert server.hits[name] == 1

    # second load, offline and with torch.load forbidden: the safetensors cache alone, no request, no pickle
    server.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_unpickling(*args, **kwargs):
        raise AssertionError("a cached conversion must not unpickle anything")

    monkeypatch.setattr(torch, "load", no_unpickling)
    second = upstream.load_upstream(build(), entry)
    for k, v in first.state_dict().items():
        assert torch.equal(second.state_dict()[k], v), k
    if layout == "mmseg_vit":  # and it still is mmseg's model
        x = torch.randn(1, 3, 40, 56, generator=torch.Generator().manual_seed(0))
        shape = tuple(x.shape[-2:])
        metas = [dict(ori_shape=shape, img_shape=shape, pad_shape=shape, padding_size=[0, 0, 0, 0])]
        with torch.no_grad():
            torch.testing.assert_close(second(x), ref.inference(x, metas), atol=1e-4, rtol=0)


def test_hub_source_deit(cache, monkeypatch, tmp_path):
    """DeiT from a timm Hub repo (safetensors) through huggingface_hub, converted once into the zoo cache."""
    hub_server = HubServer(token="hf_test").start()
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
        monkeypatch.setenv("HF_TOKEN", hub_server.token)
        repo = "timm/deit_tiny_patch16_224.fb_in1k"
        hub_server.repos[repo] = Repo(repo, private=False)
        deit = randomize_deit(RefDeiT(img=32, classes=1000), seed=7)
        path = tmp_path / "model.safetensors"
        save_file({k: v.contiguous() for k, v in deit.state_dict().items()}, str(path))
        hub_server.put_file(repo, "model.safetensors", _bytes(path))
        entry = dict(tag="sa_vit_tiny.cls_in1k", hf_hub_id=repo, file="model.safetensors", converter="timm_vit",
                     sha256=hashlib.sha256(_bytes(path)).hexdigest())
        model = upstream.load_upstream(zoo.load("sa_vit_tiny", img_size=32).eval(), entry)
        x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            torch.testing.assert_close(model(x), deit(x), atol=1e-5, rtol=0)
        assert os.path.isfile(model.pretrained_source["converted"])
    finally:
        hub_server.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again = upstream.load_upstream(zoo.load("sa_vit_tiny", img_size=32).eval(), entry)
    with torch.no_grad():
        torch.testing.assert_close(again(x), deit(x), atol=1e-5, rtol=0)


def test_with_the_registry_entry_type(server, cache, tmp_path):
    """The registry's ``PretrainedCfg`` works as the entry (state_dict_key in ``extra``)."""
    from zoo.pretrained import PretrainedCfg
    ema, data = eamlp_small(tmp_path, seed=4)
    url = server.serve("/model_best.pth.tar", data)
    entry = PretrainedCfg(tag="ea_t2t_7.cls_in1k", hf_hub_id="zoo-models/ea_t2t_7.cls_in1k", url=url,
                          converter="eamlp_t2t", extra=dict(state_dict_key="state_dict_ema"))
    model = upstream.load_upstream(_t2t(), entry)
    x = torch.randn(1, 3, 64, 64, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(model(x), ema(x), atol=1e-5, rtol=0)


def test_hash_prefix_in_the_name_is_checked(server, cache, tmp_path):
    _, data = mmseg_micro(tmp_path)
    url = server.serve("/upernet_deit-micro_mln-0123abcd.pth", data)
    with pytest.raises(UpstreamError, match=r"upernet_deit-micro_mln-0123abcd.pth: sha256 of .* is [0-9a-f]{64}, "
                                            r"expected 0123abcd\.\.\.: the file is truncated, corrupt"):
        upstream.load_upstream(_micro_seg(), _entry("sa_vit_micro.seg_x", url, "mmseg_vit"))
    assert not list((tmp_path / "hf" / "zoo" / "downloads").rglob("*.pth"))  # nothing wrong is kept


def test_connection_closed_early(server, cache, tmp_path):
    _, data = ff_official_micro(tmp_path)
    url = server.serve("/linear-micro-checkpoint.pth", data)
    server.truncate["/linear-micro-checkpoint.pth"] = len(data) // 3
    with pytest.raises(UpstreamError, match=rf"linear-micro-checkpoint.pth: the download stopped after "
                                            rf"{len(data) // 3} of {len(data)} bytes"):
        upstream.load_upstream(_micro_ff(), _entry("ff_vit_micro.cls_x", url, "ff_official"))
    # the next call downloads it whole
    model = upstream.load_upstream(_micro_ff(), _entry("ff_vit_micro.cls_x", url, "ff_official"))
    assert server.hits["/linear-micro-checkpoint.pth"] == 2 and os.path.isfile(model.pretrained_source["converted"])


def test_truncated_file_names_the_file(server, cache, tmp_path):
    """A file that is itself truncated (served whole, no hash in its name) fails when read, naming URL and file."""
    _, data = eamlp_small(tmp_path)
    url = server.serve("/EAMLP/EAMLP_7_384/model_best.pth.tar", data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"upstream weights of ea_t2t_7.cls_in1k from http://127.0.0.1:\d+/EAMLP/"
                                              r"EAMLP_7_384/model_best.pth.tar: .*model_best.pth.tar \(torch file, "
                                              r"weights_only\): the file \(\d+ bytes\) is truncated"):
        upstream.load_upstream(_t2t(), _entry("ea_t2t_7.cls_in1k", url, "eamlp_t2t", state_dict_key="state_dict_ema"))


def test_wrong_architecture_names_the_file(server, cache, tmp_path):
    _, ff = ff_official_micro(tmp_path)
    url = server.serve("/mmseg/upernet_deit-b16_mln_512x512_160k_ade20k.pth", ff)  # an FF file where mmseg's should be
    with pytest.raises(CheckpointError, match=r"upernet_deit-b16_mln_512x512_160k_ade20k.pth \(torch file, "
                                              r"weights_only\) is a FF-only official "
                                              r"checkpoint \(ff_official layout\), not the expected mmseg UPerNet"):
        upstream.load_upstream(_micro_seg(), _entry("sa_vit_base.seg_ade20k", url, "mmseg_vit"))
    _, seg = mmseg_micro(tmp_path)
    url = server.serve("/upernet_micro.pth", seg)  # right layout, wrong size: 64-wide weights for a 11-class head
    with pytest.raises(CheckpointError, match=r"(?s)upstream weights of sa_vit_micro.seg_x from .*upernet_micro.pth: .*"
                                              r"decode_head.conv_seg.weight: checkpoint \(11, 64, 1, 1\) vs model "
                                              r"\(150, 64, 1, 1\)"):
        upstream.load_upstream(zoo.load("sa_vit_micro", task="seg", **dict(MICRO_SEG, num_classes=150)),
                               _entry("sa_vit_micro.seg_x", url, "mmseg_vit"))


def test_offline_and_not_cached(cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UpstreamError, match=r"linear-tiny-checkpoint.pth is not in the local cache .* offline mode"):
        upstream.load_upstream(_micro_ff(), _entry("ff_vit_tiny.cls_in1k", "https://github.com/lukemelas/"
                                                   "do-you-even-need-attention/releases/download/v0.0.1/"
                                                   "linear-tiny-checkpoint.pth", "ff_official"))


def test_damaged_conversion_is_made_again(server, cache, tmp_path):
    _, data = ff_official_micro(tmp_path)
    entry = _entry("ff_vit_micro.cls_x", server.serve("/linear-micro-checkpoint.pth", data), "ff_official")
    first = upstream.load_upstream(_micro_ff(), entry)
    converted = first.pretrained_source["converted"]
    with open(converted, "r+b") as f:  # flip bytes inside the tensor data
        f.seek(-16, os.SEEK_END)
        f.write(b"\xff" * 16)
    second = upstream.load_upstream(_micro_ff(), entry)  # the raw download is cached: reconverted, not re-fetched
    assert server.hits["/linear-micro-checkpoint.pth"] == 1
    for k, v in first.state_dict().items():
        assert torch.equal(second.state_dict()[k], v), k


def test_fine_tuning_an_upstream_tag_keeps_its_conversion(server, cache, tmp_path, monkeypatch):
    """``zoo.load(name, pretrained=True, num_classes=10)`` on 1000-class upstream weights (timm's fine-tuning call):
    the conversion cache keeps the published head; only the returned model gets a fresh one."""
    from zoo import registry
    from zoo.pretrained import PretrainedCfg
    sd, data = ff_official_micro(tmp_path, seed=3)
    entry = PretrainedCfg(tag="ff_vit_micro.cls_x", hf_hub_id="zoo-models/ff_vit_micro.cls_x", converter="ff_official",
                          url=server.serve("/linear-micro-checkpoint.pth", data), args=dict(img_size=32))
    monkeypatch.setattr(registry, "PRETRAINED", {entry.tag: entry})
    tuned = zoo.load("ff_vit_micro", pretrained=True, num_classes=10)
    assert tuned.head.out_features == 10 and tuned.pretrained_cfg["adapted"] == {"num_classes": [1000, 10]}
    published = zoo.load("ff_vit_micro", pretrained=True)  # now from the conversion cache
    assert published.head.out_features == 1000 and torch.equal(published.head.weight, sd["head.weight"])
    assert server.hits["/linear-micro-checkpoint.pth"] == 1
    for k, v in tuned.state_dict().items():
        if not k.startswith("head."):
            assert torch.equal(published.state_dict()[k], v), k
