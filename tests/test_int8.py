"""The fast path where bf16 is emulated: int8 linears (``zoo.cpu.int8_dynamic``), what they cost in accuracy on the
bundled classifiers, and how ``zoo.cpu.fast_path`` and ``tools/benchmark.py`` pick and judge it."""
import json
import os

import pytest
import torch
import torch.nn as nn

import zoo
from zoo import cpu
from zoo.datasets import FASHION_MNIST_ROOT, read_fashion_mnist

from tests.load_tool import load_tool
from tests.test_bundled import _record


def _micro(mixer="sa"):
    torch.manual_seed(0)
    return zoo.load(f"{mixer}_vit_micro", img_size=32, num_classes=10).eval()


@pytest.mark.parametrize("mixer", ["sa", "ea", "effa", "ff"])
def test_int8_dynamic_quantises_a_copy_and_keeps_the_outputs_close(mixer):
    """Every mixer's linears are swapped (the mixers' fused paths see non-plain layers and take the module calls)."""
    model = _micro(mixer)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q = cpu.int8_dynamic(model)
    linears = [m for m in model.modules() if type(m) is nn.Linear]
    quantised = [m for m in q.modules() if type(m).__module__.startswith("torch.ao.nn.quantized.dynamic")]
    assert linears and len(quantised) == len(linears)
    assert not any(type(m) is nn.Linear for m in q.modules())
    # the model handed in is untouched: same module types, same tensors
    assert all(type(m) is nn.Linear for m in linears)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref, out = model(x), q(x)
    assert out.shape == ref.shape and out.dtype == torch.float32
    assert not torch.equal(out, ref)  # it did quantise
    cos = torch.nn.functional.cosine_similarity(out.flatten(), ref.flatten(), dim=0)
    assert cos > 0.99, f"int8 logits too far from float32 (cosine {cos:.4f})"


def test_int8_dynamic_refuses_a_model_in_training_mode():
    with pytest.raises(ValueError, match="eval"):
        cpu.int8_dynamic(_micro().train())


def test_fast_path_follows_native_bf16(monkeypatch):
    monkeypatch.setattr(cpu, "bf16_support", lambda: (True, "native bf16 (avx512_bf16)"))
    assert cpu.fast_path()[0] == "bf16"
    monkeypatch.setattr(cpu, "bf16_support", lambda: (False, "no native bf16 on this CPU"))
    name, reason = cpu.fast_path()
    assert name == "int8" and "no native bf16" in reason and "int8_dynamic" in reason


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="needs the Debian package dataset-fashion-mnist")
def test_int8_top1_of_a_bundled_classifier_against_float32():
    """int8's and float32's top-1 are both computed here on the first 1,000 t10k images (none is typed in); the
    float32 figure is also recounted by hand from the predictions' agreement with the labels."""
    bench = load_tool("benchmark")
    images, labels = read_fashion_mnist(FASHION_MNIST_ROOT, "test")
    images, labels = images[:1000], labels[:1000]
    r = bench.int8_top1("sa_vit_micro.cls_fmnist", images, labels, batch=250)
    assert r["images"] == 1000
    model = zoo.load("sa_vit_micro.cls_fmnist").eval()
    x = (torch.from_numpy(images).float() / 255 - model.pretrained_cfg["mean"][0]) / model.pretrained_cfg["std"][0]
    with torch.inference_mode():
        hits = int((model(x.unsqueeze(1)).argmax(1) == torch.as_tensor(labels).long()).sum())
    assert r["top1_fp32"] == pytest.approx(hits / 10, abs=0.1)
    assert r["top1_fp32"] > 80  # a trained model, not chance (10%)
    assert abs(r["top1_int8"] - r["top1_fp32"]) <= 1.5
    assert r["same_class"] >= 97


def test_benchmark_judges_the_fast_path_against_1_2x_timm(monkeypatch):
    bench = load_tool("benchmark")
    monkeypatch.setattr(cpu, "bf16_support", lambda: (False, "no native bf16 on this CPU"))
    rows = [dict(model="sa_vit_small", impl="timm eager", images_per_s=10.0),
            dict(model="sa_vit_small", impl="zoo fp32", images_per_s=10.2),
            dict(model="sa_vit_small", impl="zoo int8 dynamic", images_per_s=11.5)]
    lines, ok = bench.check_targets({"models": rows}, tokens=())
    assert not ok  # 1.15x timm is short of the 1.2x goal for this CPU's fast path
    assert any("zoo int8 dynamic / timm eager images/s = 1.15 (target >= 1.2, the fast path here): FAIL" in line
               for line in lines)
    rows[-1]["images_per_s"] = 12.5
    lines, ok = bench.check_targets({"models": rows}, tokens=())
    assert ok and any("zoo fp32 / timm eager images/s = 1.02 (target >= 1): PASS" in line for line in lines)


def test_benchmark_int8_top1_section_is_registered():
    bench = load_tool("benchmark")
    assert "int8-top1" in bench.SECTIONS
    args = bench.parse_args(["--only", "int8-top1"])
    assert args.only == "int8-top1" and args.fmnist_root == FASHION_MNIST_ROOT


def test_tools_test_int8_quantises_the_runners_model_and_scores_near_float32(tmp_path, monkeypatch):
    """``tools/test.py --int8`` swaps the linears of the zoo model inside the runner (in place, after the weights are
    loaded) and scores it: the bundled seg checkpoint's recorded 40-scene slice, within 2 mIoU of float32's."""
    from tasks.common.evaluate import config_of
    tag = "sa_vit_micro.seg_scenes"
    rec = _record(tag)["slice"]
    calls = []
    real = cpu.int8_dynamic

    def spy(model, inplace=False):
        calls.append((type(model).__name__, inplace, model.training))
        return real(model, inplace=inplace)
    monkeypatch.setattr(cpu, "int8_dynamic", spy)
    test = load_tool("test")
    out = tmp_path / "m.json"
    metrics = test.main([config_of(tag), "--pretrained", tag, "--int8", "--work-dir", str(tmp_path / "w"),
                         "--json-out", str(out), "--cfg-options", "test_dataloader.sampler.type=FirstNSampler",
                         f"test_dataloader.sampler.num_samples={rec['num_samples']}"])
    assert calls == [("ZooEncoderDecoder", True, False)]
    record = json.loads(out.read_text())
    assert record["int8"] is True and record["tta"] is False  # the record says how its numbers were obtained
    assert record["cfg_options"]["test_dataloader.sampler.num_samples"] == rec["num_samples"]
    got = record["metrics"]
    assert got["mIoU"] == pytest.approx(metrics["mIoU"])
    assert abs(got["mIoU"] - rec["metrics"]["mIoU"]) <= 2.0, (got, rec["metrics"])
