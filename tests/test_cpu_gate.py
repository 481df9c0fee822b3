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
