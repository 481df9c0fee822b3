"""Classification training/evaluation on mmengine: readers (IDX, ImageFolder), transforms, metric, model wrapper,
safe checkpoint loading, and tools/train.py + tools/test.py end to end on tiny data written in tmp_path."""
import gzip
import json
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import tasks.cls as cls
import zoo
from tasks.common import checkpoint as ckpt_mod
from tests.load_tool import load_tool

ROOT = Path(__file__).resolve().parents[1]
MICRO_CONFIG = ROOT / "configs/cls/sa-vit-micro-p4_1xb128-300it_fmnist-28.py"


# -- files in the real formats, written independently of the code under test -------------------------------------------
def write_idx(path, array, magic):
    """IDX: big-endian int32 magic, big-endian int32 sizes, then uint8 data; gzip if the name ends in .gz."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    raw = struct.pack(">i", magic) + b"".join(struct.pack(">i", d) for d in array.shape) + array.tobytes()
    with (gzip.open if str(path).endswith(".gz") else open)(path, "wb") as f:
        f.write(raw)


def write_fmnist(root, n_train=24, n_test=16, seed=0):
    """Tiny Fashion-MNIST folder (the four Debian file names); returns the arrays written."""
    rng = np.random.default_rng(seed)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    data = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        write_idx(root / f"{split}-images-idx3-ubyte.gz", images, 2051)
        write_idx(root / f"{split}-labels-idx1-ubyte.gz", labels, 2049)
        data[split] = (images, labels)
    return data


def tiny_config(tmp_path, data_root, name="sa_vit_micro", max_iters=4, extra=""):
    """A config inheriting the real micro config, pointed at tiny data, without random augmentation."""
    cfg = tmp_path / "tiny.py"
    cfg.write_text(f"""
_base_ = [{str(MICRO_CONFIG)!r}]
data_root = {str(data_root)!r}
model = dict(name={name!r})
train_dataloader = dict(batch_size=8, dataset=dict(data_root=data_root, index_range=None,
                                                   pipeline=[dict(type='PackClsInputs', mean=(128.,), std=(64.,))]))
test_dataloader = dict(batch_size=8, dataset=dict(data_root=data_root,
                                                  pipeline=[dict(type='PackClsInputs', mean=(128.,), std=(64.,))]))
val_dataloader = None
val_cfg = None
val_evaluator = None
train_cfg = dict(max_iters={max_iters}, val_interval=1000)
param_scheduler = [dict(type='CosineAnnealingLR', T_max={max_iters}, eta_min=1e-5, by_epoch=False, begin=0,
                        end={max_iters})]
default_hooks = dict(checkpoint=dict(interval={max_iters}), logger=dict(interval=1),
                     progress=dict(interval_s=0.0))
{extra}
""")
    return cfg


def run_tool(args, cwd, env_extra=None, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


# -- IDX / Fashion-MNIST reader ----------------------------------------------------------------------------------------
def test_fashion_mnist_reads_idx_gz(tmp_path):
    data = write_fmnist(tmp_path, n_train=12, n_test=5)
    ds = cls.FashionMNIST(data_root=str(tmp_path), split="train")
    assert len(ds) == 12 and ds.metainfo["classes"][9] == "Ankle boot"
    s = ds[7]
    assert s["img"].shape == (28, 28, 1) and s["gt_label"] == 7
    np.testing.assert_array_equal(s["img"][:, :, 0], data["train"][0][7])
    test = cls.FashionMNIST(data_root=str(tmp_path), split="test", index_range=(1, 4))
    assert len(test) == 3 and test[0]["gt_label"] == int(data["t10k"][1][1])
    np.testing.assert_array_equal(test[2]["img"][:, :, 0], data["t10k"][0][3])


def test_read_idx_header_and_errors(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a.idx", arr, 0x00000803)  # uncompressed works too
    np.testing.assert_array_equal(cls.read_idx(tmp_path / "a.idx", 2051), arr)
    # labels file where images are expected: the magic says so
    write_idx(tmp_path / "labels.gz", np.zeros(3), 2049)
    with pytest.raises(ValueError, match="magic number 2049.*expected 2051"):
        cls.read_idx(tmp_path / "labels.gz", 2051)
    # truncated data
    raw = struct.pack(">iiii", 2051, 2, 28, 28) + bytes(100)
    (tmp_path / "short.idx").write_bytes(raw)
    with pytest.raises(ValueError, match="1568 data bytes"):
        cls.read_idx(tmp_path / "short.idx", 2051)
    missing = tmp_path / "nowhere" / "train-images-idx3-ubyte.gz"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        cls.read_idx(missing)


def test_fashion_mnist_missing_files_name_path(tmp_path):
    write_fmnist(tmp_path)
    os.remove(tmp_path / "t10k-labels-idx1-ubyte.gz")
    with pytest.raises(FileNotFoundError, match=r"t10k-labels-idx1-ubyte\.gz.*dataset-fashion-mnist"):
        cls.FashionMNIST(data_root=str(tmp_path), split="test")
    write_idx(tmp_path / "train-labels-idx1-ubyte.gz", np.zeros((24, 28, 28)), 2051)  # images in the labels file
    with pytest.raises(ValueError, match="magic number 2051"):
        cls.FashionMNIST(data_root=str(tmp_path), split="train")


# -- ImageFolder + transforms ------------------------------------------------------------------------------------------
def test_image_folder_layout_and_pipeline(tmp_path):
    colors = {"cat": (255, 0, 0), "dog": (0, 128, 255)}
    for name, rgb in colors.items():
        (tmp_path / "train" / name).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (40, 30), rgb).save(tmp_path / "train" / name / f"{i}.png")
    (tmp_path / "train" / "dog" / "notes.txt").write_text("not an image")
    pipeline = [dict(type="ClsLoadImage"), dict(type="ClsResize", size=20), dict(type="CenterCrop", crop_size=16),
                dict(type="PackClsInputs", mean=(100.0, 100.0, 100.0), std=(50.0, 50.0, 50.0))]
    ds = cls.ImageFolder(data_root=str(tmp_path / "train"), pipeline=pipeline)
    assert ds.metainfo["classes"] == ("cat", "dog") and len(ds) == 4
    out = ds[3]
    assert out["data_samples"]["gt_label"] == 1
    assert out["inputs"].shape == (3, 16, 16) and out["inputs"].dtype == torch.float32
    expected = (torch.tensor(colors["dog"], dtype=torch.float32) - 100.0) / 50.0  # a flat image stays flat
    torch.testing.assert_close(out["inputs"][:, 8, 8], expected)
    (tmp_path / "empty" / "a").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no images"):
        cls.ImageFolder(data_root=str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "absent")):
        cls.ImageFolder(data_root=str(tmp_path / "absent"))


def test_random_crop_is_a_window_of_the_padded_image():
    np.random.seed(0)
    img = np.arange(6 * 6, dtype=np.uint8).reshape(6, 6, 1) + 1
    padded = np.zeros((10, 10, 1), np.uint8)
    padded[2:8, 2:8] = img
    windows = {(t, l) for t in range(5) for l in range(5)}
    seen = set()
    for _ in range(40):
        out = cls.ClsRandomCrop(size=6, padding=2)(dict(img=img))["img"]
        match = [(t, l) for t, l in windows if np.array_equal(padded[t:t + 6, l:l + 6], out)]
        assert len(match) == 1
        seen.add(match[0])
    assert len(seen) > 5  # the offsets vary
    from mmengine.registry import TRANSFORMS  # mmcv's flip, registered by tasks.cls, on an HxWx1 image
    flipped = TRANSFORMS.build(dict(type="RandomFlip", prob=1.0, direction="horizontal"))(dict(img=img))["img"]
    np.testing.assert_array_equal(flipped, img[:, ::-1])


def test_random_resized_crop_output_size():
    np.random.seed(1)
    img = np.random.randint(0, 255, size=(50, 70, 3), dtype=np.uint8)
    for _ in range(5):
        assert cls.ClsRandomResizedCrop(size=32)(dict(img=img))["img"].shape == (32, 32, 3)


# -- metric ------------------------------------------------------------------------------------------------------------
def test_topk_accuracy_hand_computed():
    # 4 images, 6 classes. Ranks of the true label: 1st, 3rd, 6th, 5th -> top-1 1/4, top-5 3/4.
    scores = torch.tensor([[0.9, 0.05, 0.02, 0.01, 0.01, 0.01],   # label 0 ranked 1
                           [0.5, 0.3, 0.1, 0.05, 0.03, 0.02],     # label 2 ranked 3
                           [0.3, 0.25, 0.2, 0.15, 0.07, 0.03],    # label 5 ranked 6
                           [0.01, 0.4, 0.3, 0.2, 0.06, 0.03]])    # label 5 ranked 5
    labels = [0, 2, 5, 5]
    metric = cls.TopKAccuracy(topk=(1, 2, 5))
    metric.process({}, [dict(pred_score=s, gt_label=l) for s, l in zip(scores[:2], labels[:2])])
    metric.process({}, [dict(pred_score=s, gt_label=l) for s, l in zip(scores[2:], labels[2:])])
    out = metric.compute_metrics(metric.results)
    assert out == pytest.approx({"top1": 25.0, "top2": 25.0, "top5": 75.0})


# -- model wrapper -----------------------------------------------------------------------------------------------------
def test_zoo_classifier_modes_and_zoo_model():
    torch.manual_seed(0)
    model = cls.ZooClassifier(name="effa_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4)
    assert model.zoo_model.zoo_config["name"] == "effa_vit_micro"
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.init_weights()  # the Runner calls this; it must not re-initialise zoo.load's weights
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    x, y = torch.randn(3, 1, 28, 28), torch.tensor([1, 4, 9])
    logits = model(x, mode="tensor")
    assert logits.shape == (3, 10)
    loss = model(x, dict(gt_label=y), mode="loss")["loss"]
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, y))
    preds = model(x, dict(gt_label=y), mode="predict")
    assert [p["gt_label"] for p in preds] == [1, 4, 9]
    torch.testing.assert_close(torch.stack([p["pred_score"] for p in preds]), logits.softmax(-1))


def test_zoo_classifier_starts_from_pretrained_weights():
    """A fine-tuning config: the weights' own sizes by default, or adapted to the data (zoo.adapt)."""
    bundled = zoo.load("ea_vit_micro.cls_fmnist").state_dict()
    same = cls.ZooClassifier(name="ea_vit_micro", pretrained=True)
    assert same.num_classes == 10 and same.zoo_model.patch_embed.img_size == (28, 28)
    assert all(torch.equal(v, bundled[k]) for k, v in same.zoo_model.state_dict().items())
    tuned = cls.ZooClassifier(name="ea_vit_micro", pretrained=True, num_classes=3, in_chans=3)
    assert tuned.num_classes == 3 and tuned.zoo_model.pretrained_cfg["adapted"] == {"num_classes": [10, 3],
                                                                                   "in_chans": [1, 3]}
    trunk = {k: v for k, v in tuned.zoo_model.state_dict().items() if not k.startswith(("head.", "patch_embed.proj.w"))}
    assert trunk and all(torch.equal(v, bundled[k]) for k, v in trunk.items())
    assert tuned(torch.randn(2, 3, 28, 28), mode="tensor").shape == (2, 3)


def test_mixup_soft_target_loss():
    torch.manual_seed(0)
    model = cls.ZooClassifier(name="sa_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4,
                              label_smoothing=0.1, mixup=dict(mixup_alpha=0.8, cutmix_alpha=0.0))
    x, y = torch.randn(4, 1, 28, 28), torch.tensor([0, 1, 2, 3])
    loss = model(x, dict(gt_label=y), mode="loss")["loss"]
    assert loss.ndim == 0 and torch.isfinite(loss)


# -- checkpoints: no arbitrary unpickling ------------------------------------------------------------------------------
class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_safe_load_refuses_code_in_pickles(tmp_path):
    marker = tmp_path / "payload_ran"
    bad = tmp_path / "bad.pth"
    torch.save({"state_dict": {"w": torch.ones(2)}, "extra": _Payload(str(marker))}, bad)
    with pytest.raises(pickle.UnpicklingError):
        ckpt_mod.safe_load(bad)
    from mmengine.runner.checkpoint import _load_checkpoint  # what Runner.resume/load_checkpoint call
    with pytest.raises(pickle.UnpicklingError):
        _load_checkpoint(str(bad), map_location="cpu")
    assert not marker.exists()
    plain = tmp_path / "plain.pth"
    torch.save({"w": torch.arange(3.0)}, plain)
    assert torch.equal(ckpt_mod.safe_load(plain)["w"], torch.arange(3.0))


def test_cpu_amp_wrapper_autocasts_bf16():
    from tasks.common import CPUAmpOptimWrapper
    lin = torch.nn.Linear(4, 4)
    wrapper = CPUAmpOptimWrapper(optimizer=torch.optim.SGD(lin.parameters(), lr=0.1))
    with wrapper.optim_context(lin):
        assert lin(torch.randn(2, 4)).dtype == torch.bfloat16
    assert lin(torch.randn(2, 4)).dtype == torch.float32


def test_tta_without_tta_model_is_a_clear_error():
    tool = load_tool("test")
    from mmengine.config import Config
    cfg = Config.fromfile(str(MICRO_CONFIG))
    with pytest.raises(ValueError, match="--tta needs `tta_model` and `tta_pipeline`"):
        tool.apply_tta(cfg)
    cfg.tta_model = dict(type="SomeTTAModel")
    cfg.tta_pipeline = [dict(type="PackClsInputs")]
    tool.apply_tta(cfg)  # mmseg's swap: the tta model wraps the original model
    assert cfg.model.type == "SomeTTAModel" and cfg.model.module.type == "ZooClassifier"
    assert cfg.test_dataloader.dataset.pipeline == [dict(type="PackClsInputs")]


# -- tools/train.py + tools/test.py end to end -------------------------------------------------------------------------
def test_train_then_test_end_to_end(tmp_path):
    data = write_fmnist(tmp_path / "fmnist")
    cfg = tiny_config(tmp_path, tmp_path / "fmnist", name="ea_vit_micro", max_iters=3)
    work = tmp_path / "work"
    r = run_tool([ROOT / "tools/train.py", cfg, "--work-dir", work], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "train [" in r.stderr and "3/3 100%" in r.stderr  # the progress display
    ckpt = work / "iter_3.pth"
    assert ckpt.is_file()
    out = tmp_path / "metrics.json"
    r = run_tool([ROOT / "tools/test.py", cfg, ckpt, "--work-dir", work, "--json-out", out], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "test [" in r.stderr
    metrics = json.loads(out.read_text())["metrics"]

    # mmengine's loader (as Runner.resume uses it) reads its own checkpoint under the weights-only allowlist.
    from mmengine.runner.checkpoint import _load_checkpoint
    full = torch.load(ckpt, map_location="cpu", weights_only=False)  # written by this test
    safe = _load_checkpoint(str(ckpt), map_location="cpu")
    assert safe["meta"]["iter"] == 3
    assert safe["message_hub"]["log_scalars"].keys() == full["message_hub"]["log_scalars"].keys()
    assert all(torch.equal(safe["state_dict"][k], v) for k, v in full["state_dict"].items())

    # Independent evaluation: the trained weights in a fresh zoo model, accuracy counted by hand.
    import zoo
    state = full["state_dict"]
    net = zoo.load("ea_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4)
    net.load_state_dict({k[len("classifier."):]: v for k, v in state.items()})
    net.eval()
    images, labels = data["t10k"]
    x = (torch.from_numpy(images).float()[:, None] - 128.0) / 64.0
    with torch.no_grad():
        logits = net(x)
    # zoo.load takes the training checkpoint itself (the zoo model's part of ZooClassifier, training state dropped).
    loaded = zoo.load("ea_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4, checkpoint=ckpt).eval()
    with torch.no_grad():
        assert torch.equal(loaded(x), logits)
    top1 = 100.0 * (logits.argmax(1).numpy() == labels).mean()
    ranks = (logits > logits[torch.arange(len(labels)), torch.from_numpy(labels).long()][:, None]).sum(1)
    top5 = 100.0 * (ranks < 5).float().mean().item()
    assert metrics["top1"] == pytest.approx(top1) and metrics["top5"] == pytest.approx(top5)


@pytest.mark.parametrize("how", ["flag", "config"])
def test_train_starts_from_pretrained_weights(tmp_path, how):
    """tools/train.py --pretrained TAG, or load_from='zoo:TAG' in the config: the Runner trains from the bundled
    weights (its init_weights keeps them), with a fresh head for the config's 12 classes; at lr 0 the saved trunk
    is the bundled one, bit for bit."""
    write_fmnist(tmp_path / "fmnist")
    extra = ("model = dict(name='ea_vit_micro', num_classes=12)\n"
             "optim_wrapper = dict(optimizer=dict(lr=0.0, weight_decay=0.0))\nparam_scheduler = None\n")
    flags = ["--pretrained", "ea_vit_micro.cls_fmnist"] if how == "flag" else []
    if how == "config":
        extra += "load_from = 'zoo:ea_vit_micro.cls_fmnist'\n"
    cfg = tiny_config(tmp_path, tmp_path / "fmnist", name="ea_vit_micro", max_iters=1, extra=extra)
    work = tmp_path / "work"
    r = run_tool([ROOT / "tools/train.py", cfg, "--work-dir", work, *flags], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    state = torch.load(work / "iter_1.pth", map_location="cpu", weights_only=False)["state_dict"]
    bundled = zoo.load("ea_vit_micro.cls_fmnist").state_dict()
    trunk = [k for k in bundled if not k.startswith("head.")]
    assert trunk and all(torch.equal(state[f"classifier.{k}"], bundled[k]) for k in trunk)
    assert state["classifier.head.weight"].shape == (12, 64)


def test_zoo_load_from_in_a_config():
    """load_from='zoo:WEIGHTS' is taken out of the config for the zoo loader; --pretrained wins over it; a .pth
    load_from stays for the Runner; an empty name is an error that shows the form."""
    from mmengine.config import Config

    from tasks.common.finetune import weights_to_start_from
    cfg = Config(dict(load_from="zoo:ea_vit_micro.cls_fmnist"))
    assert weights_to_start_from(cfg) == "ea_vit_micro.cls_fmnist" and cfg.load_from is None
    cfg = Config(dict(load_from="zoo:ea_vit_micro.cls_fmnist"))
    assert weights_to_start_from(cfg, "local-dir:/w") == "local-dir:/w" and cfg.load_from is None
    cfg = Config(dict(load_from="work/iter_10.pth"))
    assert weights_to_start_from(cfg) is None and cfg.load_from == "work/iter_10.pth"
    assert weights_to_start_from(Config(dict())) is None
    with pytest.raises(ValueError, match="names no weights.*zoo:ea_vit_micro"):
        weights_to_start_from(Config(dict(load_from="zoo:")))


def test_json_out_accepts_numpy_metrics():
    """mmseg's IoUMetric returns numpy floats; --json-out must still write plain JSON."""
    import json

    import numpy as np
    from tasks.common.evaluate import plain_metrics
    out = plain_metrics({"mIoU": np.float32(61.25), "aAcc": 90.5, "name": "x", "mAcc": np.float32(86.88),
                        "FID": np.float64(23.456789012345), "n": np.int64(7)})
    assert json.loads(json.dumps(out)) == {"mIoU": 61.25, "aAcc": 90.5, "name": "x", "mAcc": 86.88,
                                           "FID": 23.456789012345, "n": 7}
    assert np.float32(86.88).item() != 86.88  # what a plain .item() would have written
