"""tools/benchmark_gpu.py on the CPU (``--device cpu``, a smoke run of the same rows a GPU run times): the rows it
writes, and the ratios computed from its own medians."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import benchmark_gpu  # noqa: E402


def test_cpu_smoke_run_writes_every_row(tmp_path, capsys):
    argv = ["--device", "cpu", "--quick", "--rounds", "2", "--dtypes", "fp32,bf16", "--cls-batches", "1",
            "--cls-models", "sa_vit_small", "ea_vit_small", "--seg-sizes", "64", "--seg-crop", "64",
            "--seg-heads", "segformer", "--seg-mixers", "sa,ea,ff", "--out", str(tmp_path)]
    assert benchmark_gpu.main(argv) == 0
    res = json.loads((tmp_path / "benchmark_gpu.json").read_text())
    assert res["meta"]["device"] == "cpu"
    cls = {(r["model"], r["dtype"]): r for r in res["cls"]}
    assert set(cls) == {(m, d) for m in ("sa_vit_small", "ea_vit_small") for d in ("fp32", "bf16")}
    for r in cls.values():
        # images_per_s is written to one decimal: a slow (loaded) run of 2.36 images/s reads 2.4
        assert r["ms"] > 0 and r["images_per_s"] == pytest.approx(1e3 / r["ms"], rel=1e-2, abs=0.05)
    seg = {(r["mode"], r["dtype"], r["mixer"]): r for r in res["seg"]}
    # ff trains at its crop (64 here), so every (mode, dtype, mixer) row is there
    assert set(seg) == {(mo, d, m) for mo in ("infer", "train") for d in ("fp32", "bf16") for m in ("sa", "ea", "ff")}
    for (mode, dtype, mixer), r in seg.items():
        # x_sa is written to two decimals: a ratio of 0.164 (ff under emulated bf16 on an AVX2 CPU) reads 0.16
        assert r["x_sa"] == pytest.approx(seg[(mode, dtype, "sa")]["ms"] / r["ms"], rel=2e-2, abs=0.0051)
        assert r["peak_mb"] is None or r["peak_mb"] >= 0
    assert seg[("infer", "fp32", "ea")]["gflop"] > 0 and "gflop" not in seg[("infer", "fp32", "ff")]
    assert "### Seg end to end, segformer" in capsys.readouterr().out


def test_refuses_cuda_without_a_gpu(monkeypatch):
    monkeypatch.setattr(benchmark_gpu.torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="no CUDA device"):
        benchmark_gpu.main(["--device", "cuda"])


def test_unknown_dtype_is_refused(capsys):
    with pytest.raises(SystemExit):
        benchmark_gpu.parse_args(["--dtypes", "fp16"])
    assert "choose from fp32, bf16" in capsys.readouterr().err
