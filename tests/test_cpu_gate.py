"""bf16 is offered only where the CPU has it natively (zoo.cpu): the gate itself, ``tools/train.py --amp`` (warns
once and stays float32 without native bf16) and ``tools/benchmark.py --fast`` (skips the bf16 rows, saying why)."""
import warnings

import pytest

from zoo import cpu


@pytest.fixture
def no_bf16(monkeypatch):
    monkeypatch.setattr(cpu, "cpu_flags", lambda path="/proc/cpuinfo": frozenset({"avx", "avx2", "fma"}))
    monkeypatch.setattr(cpu, "_torch_says_bf16", lambda: False)
    cpu.bf16_support.cache_clear()
    yield
    cpu.bf16_support.cache_clear()


@pytest.fixture
def with_bf16(monkeypatch):
    monkeypatch.setattr(cpu, "cpu_flags", lambda path="/proc/cpuinfo": frozenset({"avx2", "avx512f", "avx512_bf16"}))
    monkeypatch.setattr(cpu, "_torch_says_bf16", lambda: None)  # a torch without the private checks
    cpu.bf16_support.cache_clear()
    yield
    cpu.bf16_support.cache_clear()


def test_gate_without_native_bf16(no_bf16):
    native, reason = cpu.bf16_support()
    assert not native and not cpu.has_native_bf16()
    assert "no native bf16" in reason and "capability" in reason


def test_gate_with_native_bf16(with_bf16):
    native, reason = cpu.bf16_support()
    assert native and "avx512_bf16" in reason


def test_gate_torch_check_alone(monkeypatch):
    monkeypatch.setattr(cpu, "cpu_flags", lambda path="/proc/cpuinfo": frozenset())
    monkeypatch.setattr(cpu, "_torch_says_bf16", lambda: True)  # e.g. AMX seen by torch, no /proc/cpuinfo
    cpu.bf16_support.cache_clear()
    try:
        assert cpu.has_native_bf16()
    finally:
        cpu.bf16_support.cache_clear()


def test_cpu_flags_reads_x86_and_arm(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu.cpu_flags(str(x86)) == {"fpu", "avx2", "avx512_bf16"}
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert "bf16" in cpu.cpu_flags(str(arm))
    assert cpu.cpu_flags(str(tmp_path / "missing")) == frozenset()


def _cfg():
    from mmengine.config import Config
    return Config(dict(optim_wrapper=dict(type="OptimWrapper", optimizer=dict(type="AdamW", lr=1e-3))))


def test_amp_without_native_bf16_warns_once_and_stays_fp32(no_bf16, monkeypatch):
    import torch
    from tasks.common import runtime
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runtime, "_warned_no_bf16", False)
    with pytest.warns(UserWarning, match=r"stays float32.*no native bf16.*slower.*CPUAmpOptimWrapper"):
        cfg = runtime.use_amp(_cfg())
    assert cfg.optim_wrapper.type == "OptimWrapper"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runtime.use_amp(_cfg()).optim_wrapper.type == "OptimWrapper"  # the second call is silent


def test_amp_with_native_bf16_autocasts(with_bf16, monkeypatch):
    import torch
    from tasks.common import runtime
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert runtime.use_amp(_cfg()).optim_wrapper.type == "CPUAmpOptimWrapper"


def test_benchmark_fast_skips_bf16_without_native(no_bf16):
    from tests.load_tool import load_tool
    bench = load_tool("benchmark")
    reason = bench.bf16_skip_reason()
    assert reason and "no native bf16" in reason
    cpu.bf16_support.cache_clear()


def test_describe_names_the_kernel_caps(monkeypatch):
    """A benchmark line says when the kernels were capped below the CPU (an AVX-512 CPU run as an AVX2 one)."""
    from zoo import cpu
    for key in cpu.ISA_CAPS:
        monkeypatch.delenv(key, raising=False)
    assert "capped" not in cpu.describe()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert cpu.describe().endswith(", kernels capped: ONEDNN_MAX_CPU_ISA=AVX2")


@pytest.mark.parametrize("env, native, says", [
    ({}, True, "avx512_bf16; torch"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, False, "ONEDNN_MAX_CPU_ISA=AVX2 holds oneDNN below AVX512_CORE_BF16"),
    ({"ONEDNN_MAX_CPU_ISA": "avx512_core_vnni"}, False, "holds oneDNN below"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX2_VNNI_2"}, False, "holds oneDNN below"),
    ({"DNNL_MAX_CPU_ISA": "AVX512_CORE"}, False, "DNNL_MAX_CPU_ISA=AVX512_CORE holds"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, True, "keeps it"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX10_1_512_AMX"}, True, "keeps it"),
    ({"ONEDNN_MAX_CPU_ISA": "ALL", "DNNL_MAX_CPU_ISA": "AVX2"}, False, "DNNL_MAX_CPU_ISA=AVX2"),
    ({"ONEDNN_MAX_CPU_ISA": "DEFAULT"}, True, "avx512_bf16; torch"),
    ({"ONEDNN_MAX_CPU_ISA": "AVX9000"}, True, "not an ISA name known here"),
    ({"ATEN_CPU_CAPABILITY": "avx2"}, True, "avx512_bf16; torch"),  # element-wise kernels only; GEMMs keep bf16
])
def test_gate_honours_a_onednn_cap_below_bf16(with_bf16, monkeypatch, env, native, says):
    """A bf16 CPU run with oneDNN capped below AVX512_CORE_BF16 (how an AVX2 machine is imitated here) emulates bf16:
    the gate says no, so ``--amp`` stays float32 instead of running 4.7x slower."""
    for key in cpu.ISA_CAPS:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cpu.bf16_support.cache_clear()
    got, reason = cpu.bf16_support()
    assert got is native and says in reason, reason


def test_amp_under_a_onednn_cap_warns_and_stays_fp32(with_bf16, monkeypatch):
    import torch
    from tasks.common import runtime
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runtime, "_warned_no_bf16", False)
    cpu.bf16_support.cache_clear()
    with pytest.warns(UserWarning, match=r"stays float32.*CPU has it.*ONEDNN_MAX_CPU_ISA=AVX2"):
        assert runtime.use_amp(_cfg()).optim_wrapper.type == "OptimWrapper"


@pytest.mark.parametrize("emulated", [False, True])
def test_benchmark_times_emulated_bf16_only_when_asked(no_bf16, emulated, capsys):
    """``--fast`` skips the bf16 rows where bf16 is emulated; ``--emulated-bf16`` times them (what emulation costs)."""
    import argparse
    from tests.load_tool import load_tool
    bench = load_tool("benchmark")
    args = argparse.Namespace(fast=True, emulated_bf16=emulated, compile=False, models=["sa_vit_micro"], batch=1,
                              img_size=32, repeats=1, no_memory=True, threads=None)
    impls = {r["impl"] for r in bench.bench_models(args)}
    # the int8 linears, this CPU's fast path without native bf16, are timed either way
    assert impls == ({"zoo fp32", "zoo int8 dynamic"} | ({"zoo bf16 autocast"} if emulated else set()))
    assert ("timed as asked" if emulated else "--emulated-bf16 times them anyway") in capsys.readouterr().out
