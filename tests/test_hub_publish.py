"""tools/publish.py: training checkpoint -> published folder -> one commit on the local Hub server.

The training side is written here in the real layouts: an mmengine config whose ``custom_imports`` register an
mmengine model exposing ``zoo_model`` (the contract every task's model follows), and an mmengine checkpoint
(``meta`` with ``dataset_meta``, ``state_dict``, ``optimizer``, ``message_hub`` with mmengine's own objects)
saved with mmengine's ``save_checkpoint``.
"""
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch

import zoo
from zoo import hub, registry
from zoo.datasets import FASHION_MNIST_CLASSES

from tests.load_tool import load_tool

from hub_server import hub_env  # noqa: F401  (fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MICRO = dict(num_classes=10, img_size=28, in_chans=1, patch_size=4)
LABELS = FASHION_MNIST_CLASSES  # what the training checkpoint's dataset_meta holds

WRAPPER = '''
import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from mmengine.registry import MODELS

import zoo


@MODELS.register_module(force=True)
class HubTestClassifier(BaseModel):
    def __init__(self, name, num_classes, img_size, in_chans, patch_size, data_preprocessor=None):
        super().__init__(data_preprocessor=data_preprocessor)
        self.classifier = zoo.load(name, task="cls", num_classes=num_classes, img_size=img_size,
                                   in_chans=in_chans, patch_size=patch_size)
        self.register_buffer("class_weights", torch.ones(num_classes))  # training-only state

    @property
    def zoo_model(self):
        return self.classifier

    def forward(self, inputs, data_samples=None, mode="tensor"):
        return self.classifier(inputs)
'''

CONFIG = '''
custom_imports = dict(imports=['hub_test_wrapper'], allow_failed_imports=False)
mean, std = (72.94,), (90.02,)  # 0..255 scale
test_pipeline = [dict(type='PackClsInputs', mean=mean, std=std)]
model = dict(type='HubTestClassifier', name='ff_vit_micro', num_classes=10, img_size=28, in_chans=1, patch_size=4)
'''


def _load_tool():
    return load_tool("publish")


@pytest.fixture
def trained(tmp_path, monkeypatch):
    """(config path, checkpoint path, metrics path, the trained zoo model) in the training layouts."""
    from mmengine.logging import MessageHub
    from mmengine.runner.checkpoint import save_checkpoint
    (tmp_path / "hub_test_wrapper.py").write_text(WRAPPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import hub_test_wrapper
    torch.manual_seed(3)
    wrapper = hub_test_wrapper.HubTestClassifier("ff_vit_micro", **MICRO)
    message_hub = MessageHub.get_instance("hub-publish-test")
    message_hub.update_scalar("train/loss", 0.5)
    checkpoint = {"meta": {"epoch": 2, "iter": 20, "dataset_meta": {"classes": LABELS}},
                  "state_dict": wrapper.state_dict(),
                  "optimizer": torch.optim.AdamW(wrapper.parameters()).state_dict(),
                  "message_hub": message_hub.state_dict(), "param_schedulers": []}
    save_checkpoint(checkpoint, str(tmp_path / "epoch_2.pth"))
    (tmp_path / "cfg.py").write_text(CONFIG)
    (tmp_path / "metrics.json").write_text(json.dumps({"accuracy/top1": 83.5, "accuracy/top5": 99.1}))
    return tmp_path / "cfg.py", tmp_path / "epoch_2.pth", tmp_path / "metrics.json", wrapper.zoo_model.eval()


def outputs(model):
    x = torch.randn(3, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model.eval()(x)


def test_publish_cli_end_to_end(hub_env, trained, tmp_path, monkeypatch):
    cfg, ckpt, metrics, model = trained
    repo = "zoo-models/ff_vit_micro.cls_fmnist"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "publish.py"), "--config", str(cfg),
                           "--checkpoint", str(ckpt), "--repo-id", repo, "--metrics", str(metrics),
                           "--dataset", "fmnist", "--results-dir", str(tmp_path / "results"), "--verbose"],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert hub_env.token not in proc.stdout + proc.stderr  # never printed nor logged, even at debug level
    writes = [r for r in hub_env.requests if r["method"] == "POST"]
    assert writes and all(r["headers"].get("authorization") == f"Bearer {hub_env.token}" for r in writes)
    assert len([r for r in writes if "/commit/" in r["path"]]) == 1

    served = hub_env.files(repo)
    assert sorted(served) == ["README.md", "config.json", "model.safetensors"]
    config = json.loads(served["config.json"])
    assert config["label_names"] == list(LABELS)  # from the checkpoint's dataset_meta
    assert config["input"]["mean"] == pytest.approx([72.94 / 255])
    assert config["input"]["std"] == pytest.approx([90.02 / 255])
    assert config["metrics"] == {"accuracy/top1": 83.5, "accuracy/top5": 99.1}
    assert config["pretrained_tag"] == "ff_vit_micro.cls_fmnist" and config["training"] == {"epoch": 2, "iter": 20}
    from safetensors.torch import load
    tensors = load(served["model.safetensors"])
    assert set(tensors) == set(model.state_dict())  # optimizer, message hub and wrapper-only buffers dropped

    record = json.load(open(tmp_path / "results" / "ff_vit_micro.cls_fmnist.json"))
    sha = hashlib.sha256(served["model.safetensors"]).hexdigest()
    assert record["revision"] == hub_env.head(repo) and record["weights"]["sha256"] == sha
    assert torch.equal(outputs(zoo.load(f"hf-hub:{repo}")), outputs(model))

    # `make cards` turns the upload record into a registry entry that makes the tag loadable.
    assert "make cards" in proc.stdout
    make_cards = load_tool("make_cards")
    entry = make_cards.load_entries(str(tmp_path / "no-bundled"), str(tmp_path / "results"))["ff_vit_micro.cls_fmnist"]
    assert (entry.hf_hub_id, entry.revision, entry.sha256) == (repo, record["revision"], sha)
    assert entry.args == record["args"] and entry.metrics == {"accuracy/top1": 83.5, "accuracy/top5": 99.1}
    from zoo import pretrained
    monkeypatch.setitem(registry.PRETRAINED, "ff_vit_micro.cls_fmnist", entry)
    monkeypatch.setattr(pretrained, "BUNDLED_DIR", str(tmp_path / "no-bundled"))
    assert torch.equal(outputs(zoo.load("ff_vit_micro", task="cls", pretrained=True)), outputs(model))


def test_publish_refuses_without_measured_metrics(hub_env, trained, tmp_path):
    cfg, ckpt, _, _ = trained
    tool = _load_tool()
    base = ["--config", str(cfg), "--checkpoint", str(ckpt), "--repo-id", "org/m", "--dataset", "fmnist",
            "--results-dir", str(tmp_path / "results")]
    with pytest.raises(SystemExit, match="without measured metrics"):
        tool.main(base)
    (tmp_path / "empty.json").write_text(json.dumps({"metrics": {"note": "todo"}}))
    with pytest.raises(SystemExit, match="no measured metric values"):
        tool.main(base + ["--metrics", str(tmp_path / "empty.json")])
    assert hub_env.repos == {} and not (tmp_path / "results").exists()


def test_publish_fallback_contract_name_task_args(trained, tmp_path):
    """A config whose mmengine model cannot be built here: cfg.model's name/task/args rebuild the zoo model."""
    _, _, metrics, _ = trained
    torch.manual_seed(4)
    model = zoo.load("sa_vit_micro", task="cls", **MICRO).eval()
    torch.save({"state_dict": {f"head_wrapper.net.{k}": v for k, v in model.state_dict().items()},
                "meta": {}}, tmp_path / "plain.pth")
    (tmp_path / "cfg2.py").write_text(
        "model = dict(type='NotRegisteredHere', name='sa_vit_micro', task='cls', "
        "args=dict(num_classes=10, img_size=28, in_chans=1, patch_size=4))\n")
    tool = _load_tool()
    assert tool.main(["--config", str(tmp_path / "cfg2.py"), "--checkpoint", str(tmp_path / "plain.pth"),
                      "--repo-id", "org/m", "--metrics", str(metrics), "--dataset", "fmnist",
                      "--out", str(tmp_path / "pub"), "--no-upload"]) == 0
    assert torch.equal(outputs(zoo.load(f"local-dir:{tmp_path / 'pub'}")), outputs(model))


def test_publish_failed_upload_leaves_the_repo_as_it_was(hub_env, trained, tmp_path):
    cfg, ckpt, metrics, _ = trained
    tool = _load_tool()
    args = ["--config", str(cfg), "--checkpoint", str(ckpt), "--repo-id", "org/m", "--metrics", str(metrics),
            "--dataset", "fmnist", "--results-dir", str(tmp_path / "results")]
    assert tool.main(args) == 0
    head, files = hub_env.head("org/m"), hub_env.files("org/m")
    # The same checkpoint again writes the same bytes (sorted safetensors metadata), so there is nothing to commit.
    assert tool.main(args) == 0 and hub_env.head("org/m") == head
    os.remove(tmp_path / "results" / "ff_vit_micro.cls_fmnist.json")
    other = tmp_path / "other_metrics.json"  # a new evaluation: config.json and the card change, a commit is due
    other.write_text(json.dumps({"accuracy/top1": 12.5}))
    args[args.index("--metrics") + 1] = str(other)
    hub_env.fail_commits = 1
    with pytest.raises(Exception, match="500"):
        tool.main(args)
    assert hub_env.head("org/m") == head and hub_env.files("org/m") == files
    assert not (tmp_path / "results" / "ff_vit_micro.cls_fmnist.json").exists()  # no record of a failed publish
