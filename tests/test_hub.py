"""Published checkpoints through the real huggingface_hub client against the local Hub server (tests/hub_server.py).

Every test gets its own server, HF_HOME / cache and token (the ``hub_env`` fixture of hub_server.py), so nothing
touches the user's cache.
Expected values are computed independently here: hashlib for digests, safetensors / json / yaml for file contents,
and the original model's outputs for round trips.
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

import zoo
from zoo import checkpoint, hub, registry

from hub_server import hub_env  # noqa: F401  (fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MICRO = dict(num_classes=10, img_size=28, in_chans=1, patch_size=4)
FMNIST_LABELS = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                 "Ankle boot"]


def micro(mixer="ff", seed=0):
    torch.manual_seed(seed)
    return zoo.load(f"{mixer}_vit_micro", task="cls", **MICRO).eval()


def outputs(model, seed=1):
    x = torch.randn(3, 1, 28, 28, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return model.eval()(x)


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def publish(model, folder, repo_id, revision=None, **save_kwargs):
    save_kwargs.setdefault("metrics", {"accuracy/top1": 80.5})
    zoo.save_pretrained(model, folder, **save_kwargs)
    oid, _ = hub.upload_folder_one_commit(str(folder), repo_id, revision=revision)
    return oid


def edit_config(folder, **changes):
    path = os.path.join(folder, "config.json")
    cfg = json.load(open(path))
    for key, value in changes.items():
        node, *rest = key.split("__")
        if rest:
            cfg[node][rest[0]] = value
        else:
            cfg[key] = value
    json.dump(cfg, open(path, "w"))


# -- the folder ---------------------------------------------------------------------------------------------------
def test_save_pretrained_writes_weights_config_and_card(tmp_path):
    model = micro()
    zoo.save_pretrained(model, tmp_path, metrics={"accuracy/top1": 84.25}, tag="ff_vit_micro.cls_fmnist",
                        config_name="configs/cls/ff-vit-micro_fmnist.py", input_spec=dict(mean=[0.286], std=[0.353]))
    assert sorted(os.listdir(tmp_path)) == ["README.md", "config.json", "model.safetensors"]
    tensors = load_file(str(tmp_path / "model.safetensors"))
    own = model.state_dict()
    assert set(tensors) == set(own) and all(torch.equal(tensors[k], own[k]) for k in own)
    cfg = json.load(open(tmp_path / "config.json"))
    assert (cfg["name"], cfg["task"]) == ("ff_vit_micro", "cls")
    assert {k: cfg["args"][k] for k in MICRO} == MICRO
    assert cfg["num_classes"] == 10 and cfg["label_names"] == FMNIST_LABELS
    assert cfg["input"] == {"img_size": [28, 28], "in_chans": 1, "mean": [0.286], "std": [0.353]}
    assert cfg["pretrained_tag"] == "ff_vit_micro.cls_fmnist" and cfg["zoo_version"] == zoo.__version__
    assert cfg["weights"]["sha256"] == sha256(tmp_path / "model.safetensors")
    assert cfg["weights"]["num_params"] == sum(p.numel() for p in model.parameters())
    assert cfg["metrics"] == {"accuracy/top1": 84.25}


def test_save_pretrained_writes_a_published_folder_again_but_never_over_a_users_files(tmp_path):
    model = micro()
    zoo.save_pretrained(model, tmp_path / "out")
    with torch.no_grad():
        model.head.bias.add_(1)
    zoo.save_pretrained(model, tmp_path / "out")  # a published folder is written again, as transformers does
    assert torch.equal(load_file(str(tmp_path / "out" / "model.safetensors"))["head.bias"], model.head.bias)
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project")
    with pytest.raises(hub.HubError, match="holds README.md but is not a folder written by the zoo"):
        zoo.save_pretrained(model, project)
    assert os.listdir(project) == ["README.md"] and (project / "README.md").read_text() == "my project"
    (project / "config.json").write_text('{"model_type": "bert"}')  # another library's folder
    with pytest.raises(hub.HubError, match="holds config.json, README.md but is not a folder written by the zoo"):
        zoo.save_pretrained(model, project)
    zoo.save_pretrained(model, project, overwrite=True)  # asked for (tools/convert.py --force)
    assert json.loads((project / "config.json").read_text())["name"] == "ff_vit_micro"
    # a save that stopped before its config.json, or one of a newer format version, is the zoo's: written again
    for stopped in (tmp_path / "stopped", tmp_path / "newer"):
        zoo.save_pretrained(model, stopped)
    (tmp_path / "stopped" / "config.json").unlink()
    cfg = json.loads((tmp_path / "newer" / "config.json").read_text())
    (tmp_path / "newer" / "config.json").write_text(json.dumps({**cfg, "format_version": 99}))
    for stopped in (tmp_path / "stopped", tmp_path / "newer"):
        zoo.save_pretrained(model, stopped)
        assert hub.read_config(str(stopped / "config.json"))["format_version"] == hub.FORMAT_VERSION


def test_model_card_front_matter_is_valid_and_data_driven(tmp_path):
    import yaml
    from huggingface_hub import ModelCard
    zoo.save_pretrained(micro("ea"), tmp_path, metrics={"accuracy/top1": 81.0, "accuracy/top5": 99.25},
                        tag="ea_vit_micro.cls_fmnist", config_name="configs/cls/ea-vit-micro_fmnist.py")
    text = open(tmp_path / "README.md").read()
    assert text.startswith("---\n")
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["library_name"] == "zoo" and meta["license"] == "apache-2.0"
    assert meta["pipeline_tag"] == "image-classification"
    assert meta["datasets"] == ["zalando-datasets/fashion_mnist"]
    assert "token-mixer-ea" in meta["tags"]
    result = meta["model-index"][0]["results"][0]
    assert result["task"]["type"] == "image-classification"
    assert result["dataset"]["name"] == "Fashion-MNIST" and result["dataset"]["split"] == "test"
    assert {m["name"]: m["value"] for m in result["metrics"]} == {"accuracy/top1": 81.0, "accuracy/top5": 99.25}
    # The Hub client's own card parser reads the same metrics.
    card = ModelCard.load(str(tmp_path / "README.md"))
    assert sorted(r.metric_value for r in card.data.eval_results) == [81.0, 99.25]
    body = text.split("---\n", 2)[2]
    assert "Beyond Self-attention: External Attention" in body  # the mixer's paper
    assert "configs/cls/ea-vit-micro_fmnist.py" in body  # the recipe
    assert 'zoo.load("' in body and "@article{guo2021external" in body  # usage and citation


def test_model_card_prints_normalisation_constants_short():
    """mmseg's ImageNet std 57.12 / 255 is 0.22399999999999998 as a float; the card says 0.224."""
    from zoo.cards import model_card
    with open(os.path.join(ROOT, "pretrained", "ea_vit_micro.seg_scenes", "config.json")) as f:
        cfg = json.load(f)
    assert cfg["input"]["std"][1] == 57.12 / 255 == 0.22399999999999998
    line = next(t for t in model_card(cfg).splitlines() if t.startswith("| Normalisation"))
    assert "mean [0.485, 0.456, 0.406], std [0.229, 0.224, 0.225]" in line, line


def test_front_matter_survives_tricky_strings(tmp_path):
    from huggingface_hub import ModelCard
    """The front matter is huggingface_hub's ModelCardData: YAML-special text round-trips through its parser."""
    model = micro("sa")
    tricky = {"name": 'yes: "no" #1', "id": None, "split": "null", "key": "tricky"}
    zoo.save_pretrained(model, tmp_path / "pub", metrics={"accuracy/top1": 0.123456789}, dataset=tricky)
    card = ModelCard.load(str(tmp_path / "pub" / "README.md"))
    result = card.data.eval_results[0]
    assert (result.dataset_name, result.dataset_split) == ('yes: "no" #1', "null")
    assert result.metric_value == 0.1235  # cards print 4 significant digits; config.json keeps the exact value
    assert json.load(open(tmp_path / "pub" / "config.json"))["metrics"]["accuracy/top1"] == 0.123456789


def test_local_dir_roundtrip_is_exact(tmp_path):
    model = micro("sa")
    zoo.save_pretrained(model, tmp_path / "pub")
    loaded = zoo.load(f"local-dir:{tmp_path / 'pub'}")
    assert loaded.zoo_config["name"] == "sa_vit_micro" and loaded.pretrained_cfg["num_classes"] == 10
    assert torch.equal(outputs(model), outputs(loaded))


def test_a_folder_without_a_tag_keeps_its_normalisation(tmp_path):
    """A folder of one's own (no pretrained tag) gives ``pretrained_cfg`` the same flat input fields as a tag does,
    so ``zoo.preprocess`` normalises with the stored mean/std: it once fell back to 0.5 for a 1-channel model."""
    import numpy as np
    zoo.save_pretrained(micro("ea"), tmp_path / "pub", input_spec=dict(mean=[0.25], std=[0.4]))
    loaded = zoo.load(f"local-dir:{tmp_path / 'pub'}")
    cfg = loaded.pretrained_cfg
    assert (cfg["input_size"], cfg["mean"], cfg["std"]) == ((1, 28, 28), (0.25,), (0.4,))
    image = np.full((28, 28), 153, np.uint8)  # 0.6 in 0..1 units
    assert zoo.preprocess(image, loaded).flatten().tolist() == pytest.approx([(0.6 - 0.25) / 0.4] * 28 * 28)


def test_zoo_config_must_be_plain_json(tmp_path):
    model = micro()
    model.zoo_config = dict(model.zoo_config, args=dict(model.zoo_config["args"], bad=torch.nn.GELU))
    with pytest.raises(hub.HubError, match="plain JSON"):
        zoo.save_pretrained(model, tmp_path)


# -- the Hub: publish, download, revisions, registry tags, cache ----------------------------------------------------
def test_publish_then_download_reproduces_outputs(hub_env, tmp_path):
    model = micro()
    oid = publish(model, tmp_path / "pub", "zoo-models/ff_vit_micro.cls_fmnist")
    commits = [r for r in hub_env.requests if r["method"] == "POST" and "/commit/" in r["path"]]
    assert len(commits) == 1  # one commit for all files
    served = hub_env.files("zoo-models/ff_vit_micro.cls_fmnist")
    assert sorted(served) == ["README.md", "config.json", "model.safetensors"]
    for name, data in served.items():
        assert data == open(tmp_path / "pub" / name, "rb").read()
    assert hub_env.head("zoo-models/ff_vit_micro.cls_fmnist") == oid
    loaded = zoo.load("hf-hub:zoo-models/ff_vit_micro.cls_fmnist")
    assert torch.equal(outputs(model), outputs(loaded))
    assert os.path.isdir(tmp_path / "hf" / "hub" / "models--zoo-models--ff_vit_micro.cls_fmnist")


def test_revisions_commit_and_branch(hub_env, tmp_path):
    first, second, third = micro(seed=0), micro(seed=1), micro(seed=2)
    oid1 = publish(first, tmp_path / "v1", "org/ff")
    publish(second, tmp_path / "v2", "org/ff")
    publish(third, tmp_path / "v3", "org/ff", revision="dev")
    assert torch.equal(outputs(zoo.load("hf-hub:org/ff")), outputs(second))
    assert torch.equal(outputs(zoo.load(f"hf-hub:org/ff@{oid1}")), outputs(first))
    assert torch.equal(outputs(zoo.load("hf-hub:org/ff@dev")), outputs(third))
    with pytest.raises(hub.HubError, match="no revision 'nope'"):
        zoo.load("hf-hub:org/ff@nope")


def _register(monkeypatch, tag, repo_id, oid, sha, tmp_path=None):
    """Register a tag pointing at the test Hub; no checkout folder shadows it (BUNDLED_DIR points elsewhere)."""
    from zoo import pretrained
    entry = pretrained.PretrainedCfg(tag=tag, hf_hub_id=repo_id, revision=oid, sha256=sha, args=MICRO)
    monkeypatch.setitem(registry.PRETRAINED, tag, entry)
    monkeypatch.setattr(pretrained, "BUNDLED_DIR", str(tmp_path or "/nonexistent/zoo-bundled"))


def test_pretrained_tag_through_the_registry(hub_env, tmp_path, monkeypatch):
    model = micro()
    oid = publish(model, tmp_path / "pub", "zoo-models/ff_vit_micro.cls_fmnist", tag="ff_vit_micro.cls_fmnist")
    _register(monkeypatch, "ff_vit_micro.cls_fmnist", "zoo-models/ff_vit_micro.cls_fmnist", oid,
              sha256(tmp_path / "pub" / "model.safetensors"))
    # The tag's args (10 classes, 28x28, 1 channel) are the build defaults: no need to repeat them.
    loaded = zoo.load("ff_vit_micro", task="cls", pretrained=True)
    assert torch.equal(outputs(model), outputs(loaded))
    assert torch.equal(outputs(model), outputs(zoo.load("ff_vit_micro.cls_fmnist")))
    assert loaded.pretrained_cfg["label_names"] == FMNIST_LABELS


def test_second_load_comes_from_cache_with_server_stopped(hub_env, tmp_path):
    model = micro()
    publish(model, tmp_path / "pub", "org/ff")
    zoo.load("hf-hub:org/ff")
    hub_env.stop()
    assert torch.equal(outputs(zoo.load("hf-hub:org/ff")), outputs(model))
    # A fresh process with HF_HUB_OFFLINE=1 (read at huggingface_hub's import) loads from the same cache.
    out = tmp_path / "offline.pt"
    script = ("import sys, torch, zoo; m = zoo.load('hf-hub:org/ff').eval(); "
              "x = torch.randn(3, 1, 28, 28, generator=torch.Generator().manual_seed(1)); "
              "torch.set_grad_enabled(False); torch.save(m(x), sys.argv[1])")  # the same no-grad forward as outputs()
    # Same thread count as this process: CPU GEMM reductions are only bit-identical for equal thread counts.
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=ROOT, OMP_NUM_THREADS=str(torch.get_num_threads()))
    proc = subprocess.run([sys.executable, "-c", script, str(out)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert torch.equal(torch.load(out, weights_only=True), outputs(model))
    # Offline and not cached: a clear error, no network attempt needed to say so.
    proc = subprocess.run([sys.executable, "-c", "import zoo; zoo.load('hf-hub:org/never')"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "not in the local Hub cache" in proc.stderr and "offline" in proc.stderr


def test_private_repo_needs_the_token(hub_env, tmp_path, monkeypatch):
    model = micro()
    zoo.save_pretrained(model, tmp_path / "pub", metrics={"accuracy/top1": 1.0})
    hub.upload_folder_one_commit(str(tmp_path / "pub"), "org/private", private=True)
    assert hub_env.repos["org/private"].private
    assert torch.equal(outputs(zoo.load("hf-hub:org/private")), outputs(model))
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))
    with pytest.raises(hub.HubError, match="not found .*private without a valid token"):
        zoo.load("hf-hub:org/private", force_download=True)
    with pytest.raises(hub.HubError, match="not found .*private without a valid token"):
        zoo.load("hf-hub:org/private", cache_dir=tmp_path / "empty-cache")


# -- verification errors --------------------------------------------------------------------------------------------
def test_registry_sha256_mismatch_is_an_error(hub_env, tmp_path, monkeypatch):
    oid = publish(micro(), tmp_path / "pub", "org/ff")
    wrong = hashlib.sha256(b"something else").hexdigest()
    _register(monkeypatch, "ff_vit_micro.cls_fmnist", "org/ff", oid, wrong)
    with pytest.raises(hub.ChecksumError) as err:
        zoo.load("ff_vit_micro", task="cls", pretrained=True)
    msg = str(err.value)
    assert wrong in msg and sha256(tmp_path / "pub" / "model.safetensors") in msg and "PRETRAINED" in msg


def test_corrupted_weights_served_by_the_hub(hub_env, tmp_path):
    publish(micro(), tmp_path / "pub", "org/ff")
    data = bytearray(open(tmp_path / "pub" / "model.safetensors", "rb").read())
    data[-100:] = bytes(100)  # flip the tail of the last tensor's data; the header still parses
    hub_env.put_file("org/ff", "model.safetensors", bytes(data))
    with pytest.raises(hub.ChecksumError, match="corrupted"):
        zoo.load("hf-hub:org/ff")


def test_truncated_weights(tmp_path):
    zoo.save_pretrained(micro(), tmp_path)
    path = tmp_path / "model.safetensors"
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(zoo.CheckpointError) as err:
        zoo.load(f"local-dir:{tmp_path}")
    assert f"{path} (safetensors, {len(data) // 2} bytes): the file is truncated or corrupted" in str(err.value)


def test_corrupted_weights_in_a_folder(tmp_path):
    zoo.save_pretrained(micro(), tmp_path)
    path = tmp_path / "model.safetensors"
    data = bytearray(open(path, "rb").read())
    data[-4:] = b"\x00\x00\xc0\x7f"  # a NaN where a weight was
    open(path, "wb").write(bytes(data))
    with pytest.raises(hub.ChecksumError, match="config.json says"):
        zoo.load(f"local-dir:{tmp_path}")


def test_config_for_another_architecture(tmp_path):
    zoo.save_pretrained(micro("ff"), tmp_path / "ff")
    zoo.save_pretrained(micro("sa"), tmp_path / "sa")
    os.replace(tmp_path / "sa" / "config.json", tmp_path / "ff" / "config.json")
    with pytest.raises(hub.ArchitectureMismatchError, match="describes sa_vit_micro .* holds weights of ff_vit_micro"):
        zoo.load(f"local-dir:{tmp_path / 'ff'}")


def test_registry_tag_pointing_at_another_model(hub_env, tmp_path, monkeypatch):
    oid = publish(micro("sa"), tmp_path / "pub", "org/sa")
    _register(monkeypatch, "ff_vit_micro.cls_fmnist", "org/sa", oid, sha256(tmp_path / "pub" / "model.safetensors"))
    with pytest.raises(hub.ArchitectureMismatchError, match="describes sa_vit_micro .* tag is for ff_vit_micro"):
        zoo.load("ff_vit_micro", task="cls", pretrained=True)


def test_missing_and_unexpected_keys(tmp_path):
    model = micro()
    zoo.save_pretrained(model, tmp_path)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    del state["norm.weight"]
    state["extra.bias"] = torch.zeros(3)
    save_file(state, str(tmp_path / "model.safetensors"))  # weights from another tool: no zoo header
    edit_config(tmp_path, weights__sha256=sha256(tmp_path / "model.safetensors"))
    with pytest.raises(hub.WeightsMismatchError) as err:
        zoo.load(f"local-dir:{tmp_path}")
    msg = str(err.value)
    assert "missing keys (1): norm.weight" in msg and "unexpected keys (1): extra.bias" in msg


def test_override_that_changes_the_head_is_named(tmp_path):
    zoo.save_pretrained(micro(), tmp_path)
    assert zoo.load(f"local-dir:{tmp_path}", num_classes=5).head.out_features == 5  # zoo.load adapts (zoo.adapt)
    with pytest.raises(hub.WeightsMismatchError) as err:  # the hub's own loader loads exactly what it is given
        hub.load_published(f"local-dir:{tmp_path}", num_classes=5)
    msg = str(err.value)
    assert f"{tmp_path / 'model.safetensors'} (safetensors of local-dir:{tmp_path}) does not fit ff_vit_micro" in msg
    assert "mismatched shapes (2): head.bias: checkpoint (10,) vs model (5,), head.weight: checkpoint (10, 64) vs " \
           "model (5, 64)" in msg and "zoo.load(..., num_classes=n)" in msg


# -- interrupted downloads --------------------------------------------------------------------------------------------
def test_interrupted_download_resumes_with_range(hub_env, tmp_path, monkeypatch):
    import huggingface_hub.constants as hf_constants
    # Small read chunks so that the bytes received before the drop count as downloaded (default: 10 MB chunks).
    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)
    model = micro()
    publish(model, tmp_path / "pub", "org/ff")
    size = os.path.getsize(tmp_path / "pub" / "model.safetensors")
    hub_env.drop_downloads = {"model.safetensors": size // 2}
    loaded = zoo.load("hf-hub:org/ff")
    assert torch.equal(outputs(loaded), outputs(model))
    ranged = [r["headers"]["range"] for r in hub_env.requests if "range" in r["headers"]]
    assert len(ranged) == 1 and int(ranged[0].split("=")[1].rstrip("-")) > 0


def test_interrupted_download_then_a_new_call(hub_env, tmp_path, monkeypatch):
    import huggingface_hub.constants as hf_constants
    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)
    model = micro()
    publish(model, tmp_path / "pub", "org/ff")
    size = os.path.getsize(tmp_path / "pub" / "model.safetensors")
    hub_env.drop_downloads = {"model.safetensors": size // 3}
    hub_env.fail_resumes = 1  # the in-call resume fails too: the call gives up
    with pytest.raises(hub.HubError, match="call again"):
        zoo.load("hf-hub:org/ff")
    blobs = tmp_path / "hf" / "hub" / "models--org--ff" / "blobs"
    assert sha256(tmp_path / "pub" / "model.safetensors") not in os.listdir(blobs)  # no partial file kept as blob
    loaded = zoo.load("hf-hub:org/ff")
    assert torch.equal(outputs(loaded), outputs(model))


# -- uploads --------------------------------------------------------------------------------------------------------
def test_failed_commit_leaves_the_repo_unchanged(hub_env, tmp_path):
    from huggingface_hub import HfApi
    publish(micro(seed=0), tmp_path / "v1", "org/ff")
    before_head, before_files = hub_env.head("org/ff"), hub_env.files("org/ff")
    zoo.save_pretrained(micro(seed=1), tmp_path / "v2", metrics={"accuracy/top1": 1.0})
    hub_env.fail_commits = 1
    with pytest.raises(Exception, match="500"):
        hub.upload_folder_one_commit(str(tmp_path / "v2"), "org/ff")
    assert hub_env.head("org/ff") == before_head and hub_env.files("org/ff") == before_files
    api = HfApi(endpoint=hub_env.url)
    assert api.model_info("org/ff").sha == before_head
    assert sorted(api.list_repo_files("org/ff")) == ["README.md", "config.json", "model.safetensors"]


def test_upload_needs_a_token(hub_env, tmp_path, monkeypatch):
    zoo.save_pretrained(micro(), tmp_path, metrics={"accuracy/top1": 1.0})
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "no-token"))
    import huggingface_hub.constants as hf_constants
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    with pytest.raises(hub.HubError, match="HF_TOKEN"):
        hub.upload_folder_one_commit(str(tmp_path), "org/ff")
    assert "org/ff" not in hub_env.repos


# -- every task ----------------------------------------------------------------------------------------------------
TASK_CASES = {
    "cls": (dict(num_classes=3, img_size=16, in_chans=1, patch_size=4), "image-classification"),
    "seg": (dict(img_size=32, num_classes=4), "image-segmentation"),
    "gen": (dict(img_size=16, out_chans=1), "unconditional-image-generation"),
    "pcls": (dict(num_points=128, num_classes=5), "other"),
    "pseg": (dict(num_points=128, num_classes=6, num_categories=2), "other"),
}


@pytest.mark.parametrize("task", sorted(TASK_CASES))
def test_every_task_publishes_and_reloads(task, tmp_path):
    import yaml
    kwargs, pipeline = TASK_CASES[task]
    torch.manual_seed(0)
    model = zoo.load("ea_vit_micro", task=task, **kwargs).eval()
    cfg = zoo.save_pretrained(model, tmp_path, metrics={"score": 1.0})
    assert cfg["task"] == task and {k: cfg["args"][k] for k in kwargs} == kwargs
    meta = yaml.safe_load(open(tmp_path / "README.md").read().split("---\n")[1])
    assert meta["pipeline_tag"] == pipeline
    loaded = zoo.load(f"local-dir:{tmp_path}").eval()
    assert type(loaded) is type(model)
    # What a folder holds: the whole state, or the published part of a model that defines one (the GAN's EMA copy).
    a, b = checkpoint.published_state_dict(model), checkpoint.published_state_dict(loaded)
    assert set(a) == set(load_file(str(tmp_path / "model.safetensors")))
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)
    with torch.no_grad():
        if task == "pcls":
            pts = torch.randn(2, 128, 3, generator=torch.Generator().manual_seed(0))
            assert torch.equal(model(pts), loaded(pts))
        elif task == "gen":
            assert torch.equal(model.sample(2, seed=0), loaded.sample(2, seed=0))


def test_init_only_arguments_are_not_published(tmp_path):
    """The trunk checkpoint a segmentor started from on the training machine is not needed to load it elsewhere."""
    torch.manual_seed(0)
    zoo.save_pretrained(zoo.load("ea_vit_micro", task="cls", num_classes=3, img_size=32), tmp_path / "trunk")
    trunk = str(tmp_path / "trunk" / "model.safetensors")
    model = zoo.load("ea_vit_micro", task="seg", img_size=32, num_classes=4, backbone_checkpoint=trunk).eval()
    cfg = zoo.save_pretrained(model, tmp_path / "pub")
    assert cfg["args"]["backbone_checkpoint"] is None
    os.remove(trunk)
    loaded = zoo.load(f"local-dir:{tmp_path / 'pub'}").eval()
    a, b = model.state_dict(), loaded.state_dict()
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


# -- what is stored: the GAN's EMA generator, float16 -----------------------------------------------------------------
def _gan(seed=0):
    torch.manual_seed(seed)
    model = zoo.load("sa_vit_micro", task="gen", img_size=16, out_chans=1)
    with torch.no_grad():  # make the three networks differ, as after training
        for p in model.generator_ema.parameters():
            p.add_(0.01 * torch.randn_like(p))
    return model.eval()


def test_gan_folder_holds_the_ema_generator_and_loads_it_into_both_generators(tmp_path):
    model = _gan()
    cfg = zoo.save_pretrained(model, tmp_path, metrics={"FID": 1.0})
    stored = load_file(str(tmp_path / "model.safetensors"))
    ema = model.generator_ema.state_dict()
    assert set(stored) == {f"generator_ema.{k}" for k in ema}
    assert cfg["weights"]["num_params"] == sum(v.numel() for v in ema.values() if v.is_floating_point())
    assert cfg["weights"]["part"] == "generator_ema"
    assert f"| Parameters | {cfg['weights']['num_params'] / 1e6:.3f} M (`generator_ema`," in (tmp_path / "README.md").read_text()
    loaded = zoo.load(f"local-dir:{tmp_path}").eval()
    for net in (loaded.generator_ema, loaded.generator):  # fine-tuning starts from the published generator
        got = net.state_dict()
        assert all(torch.equal(got[k], ema[k]) for k in ema)
    assert torch.equal(loaded.sample(4, seed=3), model.sample(4, seed=3))
    # The weights file alone, as checkpoint= of a GAN built by name, goes through the same check and load.
    by_file = zoo.load("sa_vit_micro", task="gen", img_size=16, out_chans=1,
                       checkpoint=str(tmp_path / "model.safetensors")).eval()
    assert torch.equal(by_file.sample(4, seed=3), model.sample(4, seed=3))


def test_a_whole_gan_state_still_loads(tmp_path):
    """Folders written before the EMA-only layout hold all three networks; they load whole."""
    model = _gan()
    zoo.save_pretrained(model, tmp_path, metrics={"FID": 1.0})
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "model.safetensors"))
    edit_config(tmp_path, weights__sha256=sha256(tmp_path / "model.safetensors"))
    loaded = zoo.load(f"local-dir:{tmp_path}")
    a, b = model.state_dict(), loaded.state_dict()
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_a_gan_folder_missing_an_ema_key_names_it(tmp_path):
    model = _gan()
    zoo.save_pretrained(model, tmp_path, metrics={"FID": 1.0})
    state = load_file(str(tmp_path / "model.safetensors"))
    gone = sorted(state)[0]
    del state[gone]
    save_file(state, str(tmp_path / "model.safetensors"))
    edit_config(tmp_path, weights__sha256=sha256(tmp_path / "model.safetensors"))
    with pytest.raises(hub.WeightsMismatchError, match=f"missing keys \\(1\\): {gone}"):
        zoo.load(f"local-dir:{tmp_path}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_weights_stored_in_half_precision_load_as_float32(dtype, tmp_path):
    model = micro("ea")
    cfg = zoo.save_pretrained(model, tmp_path, metrics={"top1": 1.0}, dtype=dtype)
    stored = load_file(str(tmp_path / "model.safetensors"))
    floats = {k: v for k, v in stored.items() if v.is_floating_point()}
    assert floats and {v.dtype for v in floats.values()} == {getattr(torch, dtype)}
    assert cfg["weights"]["dtype"] == dtype  # the micro classifier has no integer buffers
    loaded = zoo.load(f"local-dir:{tmp_path}")
    own = model.state_dict()
    for k, v in loaded.state_dict().items():  # cast back to the model's float32, values rounded once
        assert v.dtype == own[k].dtype and torch.equal(v, own[k].to(getattr(torch, dtype)).to(own[k].dtype))
    assert os.path.getsize(tmp_path / "model.safetensors") < 0.6 * sum(v.numel() * 4 for v in own.values())


def test_an_integer_dtype_is_refused(tmp_path):
    with pytest.raises(hub.HubError, match="not a floating-point torch dtype"):
        zoo.save_pretrained(micro(), tmp_path, metrics={"top1": 1.0}, dtype="int8")


def test_the_same_weights_give_the_same_bytes(tmp_path):
    """safetensors writes its metadata in a hash map's order, which varies between calls; the zoo sorts it, so
    publishing one checkpoint twice gives one sha256, and the file stays readable by safetensors."""
    import struct
    from safetensors import safe_open
    model = micro("ea")
    shas = []
    for i in range(4):  # several writes: one unlucky hash-map order would be enough to differ
        cfg = zoo.save_pretrained(model, tmp_path / str(i), metrics={"top1": 1.0}, dtype="float16")
        shas.append(cfg["weights"]["sha256"])
    assert len(set(shas)) == 1 and shas[0] == sha256(tmp_path / "0" / "model.safetensors")
    raw = open(tmp_path / "0" / "model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    assert n % 8 == 0
    meta = json.loads(raw[8:8 + n])["__metadata__"]
    assert list(meta) == sorted(meta) and meta["zoo_name"] == "ea_vit_micro"
    with safe_open(str(tmp_path / "0" / "model.safetensors"), "pt") as f:
        assert f.metadata() == meta and set(f.keys()) == set(model.state_dict())


def test_a_tensor_beyond_float16_keeps_its_precision(tmp_path):
    """A batch norm whose running variance exceeds float16's 65504 (large features, seen in a seg head trained at lr
    4e-3): stored as float16 it would be inf and the model would predict nonsense; that one tensor stays float32,
    the rest is float16, and the model loads back with the variance exact."""
    model = zoo.load("ea_vit_micro", task="seg", num_classes=11, img_size=64)
    prefix, bn = next((n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d))
    with torch.no_grad():
        bn.running_var.fill_(3.0e5)
        bn.running_var[0] = 65504.0  # the largest float16: fits
    cfg = zoo.save_pretrained(model, tmp_path, metrics={"mIoU": 1.0}, dtype="float16")
    stored = load_file(str(tmp_path / "model.safetensors"))
    name = f"{prefix}.running_var"
    assert stored[name].dtype == torch.float32 and torch.equal(stored[name], bn.running_var)
    others = {v.dtype for k, v in stored.items() if v.is_floating_point() and k != name}
    assert others == {torch.float16}
    assert cfg["weights"]["dtype"] == ["float16", "float32", "int64"]
    loaded = zoo.load(f"local-dir:{tmp_path}").state_dict()
    assert torch.isfinite(loaded[name]).all() and torch.equal(loaded[name], bn.running_var)


@pytest.mark.parametrize("name", ["hf-hub:", "hf-hub:org", "hf-hub:a/b/c", "hf-hub:/name", "hf-hub:org/name@"])
def test_a_malformed_hub_name_is_refused_before_any_download(name):
    with pytest.raises(hub.HubError, match="expected hf-hub:org/name or hf-hub:org/name@revision"):
        hub.parse_name(name)
    assert hub.parse_name("hf-hub:org/name@v1") == ("hf-hub", "org/name", "v1")
