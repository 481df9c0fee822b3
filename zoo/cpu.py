"""CPU facts for the tools (imports only torch): native bfloat16 or not (``tools/train.py --amp``,
``tools/benchmark.py --fast``), and one row's peak memory (``PeakMemory``; the benchmarks' per-row ``peak MB``).

bf16 autocast pays off on a CPU only where the matrix units take bf16 directly: x86 with AVX512-BF16 (``vdpbf16ps``,
Intel Cooper Lake / Sapphire Rapids and later, AMD Zen 4 and later) or AMX-BF16 (Intel Sapphire Rapids and later),
and Arm with the BF16 extension. Without them oneDNN converts bf16 to float32 around every GEMM, and the bf16 path is
much slower than plain float32 (``sa_vit_small`` inference: 4.7x with oneDNN held to AVX2 by
``ONEDNN_MAX_CPU_ISA=AVX2``, 7x on an AVX2-only AMD EPYC in issue 13; docs/BENCHMARKS.md, "bf16 where the CPU
has it"). torch's own ``get_cpu_capability()`` names only the
vector ISA ("AVX2", "AVX512", ...), not bf16, so the answer combines it with torch's private per-feature checks and
the kernel's CPU flags, and honours a cap that holds oneDNN below the CPU (``ONEDNN_MAX_CPU_ISA=AVX2`` makes a Zen 4
an AVX2 machine for the GEMMs, and bf16 emulated).
"""
import ctypes
import functools
import gc
import os
import platform

import torch

# What the bf16 path costs where it is emulated (the warnings quote it; measured, see the module docstring).
EMULATED_BF16_SLOWDOWN = ("4.7x slower (sa_vit_small, batch 8, 224 px, torch 2.13, oneDNN held to AVX2 on a "
                          "Zen 4 EPYC; 7x on an AVX2-only EPYC, issue 13)")

# /proc/cpuinfo flags that mean native bf16 matrix arithmetic (x86 "flags", aarch64 "Features").
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")


def cpu_flags(path="/proc/cpuinfo"):
    """The first processor's flag set from ``/proc/cpuinfo`` (empty where unreadable, e.g. not Linux)."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def _torch_says_bf16():
    """torch's private checks (``torch.cpu._is_avx512_bf16_supported`` / ``_is_amx_tile_supported``), or None."""
    answers = []
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        fn = getattr(torch.cpu, name, None)
        if fn is not None:
            try:
                answers.append(bool(fn()))
            except (RuntimeError, AttributeError):
                pass
    return any(answers) if answers else None


# oneDNN's ISA levels as the bit masks of its ``dnnl_cpu_isa_t`` (oneDNN 3.x ``dnnl_types.h``; the newer AVX10 names
# alias the AVX512_CORE_FP16 / AMX ones). ``ONEDNN_MAX_CPU_ISA`` (or the older ``DNNL_MAX_CPU_ISA``) caps the GEMM
# kernels at one of them; bf16 matmuls stay native only under a cap that contains AVX512_CORE_BF16's bits (an AMX
# cap does, AVX2_VNNI_2 does not). "ALL" and "DEFAULT" are no cap.
ONEDNN_ISA_MASKS = {
    "SSE41": 0x1, "AVX": 0x3, "AVX2": 0x7, "AVX2_VNNI": 0xF, "AVX2_VNNI_2": 0x1F, "AVX512_CORE": 0x27,
    "AVX512_CORE_VNNI": 0x67, "AVX512_CORE_BF16": 0xE7, "AVX512_CORE_FP16": 0x1EF, "AVX10_1_512": 0x1EF,
    "AVX512_CORE_AMX": 0xFEF, "AVX10_1_512_AMX": 0xFEF, "AVX512_CORE_AMX_FP16": 0x1FEF,
    "AVX10_1_512_AMX_FP16": 0x1FEF,
}
ONEDNN_BF16_MASK = ONEDNN_ISA_MASKS["AVX512_CORE_BF16"]
# The variables oneDNN reads its cap from, in the order it reads them.
ONEDNN_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def onednn_cap():
    """``(variable, value)`` of the oneDNN ISA cap in force (``ONEDNN_MAX_CPU_ISA`` before ``DNNL_MAX_CPU_ISA``, as
    oneDNN reads them), or None. Only this cap matters to the bf16 gate: ``ATEN_CPU_CAPABILITY=avx2`` changes torch's
    element-wise kernels but not the bf16 GEMMs (``sa_vit_small`` with it, 1 thread on the Zen 4 EPYC: bf16 autocast
    515 ms against 1385 ms float32; with ``ONEDNN_MAX_CPU_ISA=AVX2``: 6580 against 1409 ms)."""
    for key in ONEDNN_CAPS:
        value = os.environ.get(key, "").strip()
        if value and value.upper() not in ("ALL", "DEFAULT"):
            return key, value
    return None


@functools.lru_cache(maxsize=None)
def bf16_support():
    """``(native, reason)``: whether this CPU runs bf16 matmuls natively, and a one-line reason naming the evidence.

    Native when torch's checks (AVX512-BF16 or AMX tiles) or the kernel's CPU flags (``avx512_bf16``, ``amx_bf16``;
    aarch64 ``bf16``) say so, unless ``ONEDNN_MAX_CPU_ISA`` caps oneDNN below AVX512_CORE_BF16 (``onednn_cap``):
    then the CPU has bf16 but the GEMMs may not use it. A cap this module does not know is named in the reason and
    left to the CPU's answer. Cached; tests patch ``cpu_flags`` / ``_torch_says_bf16`` and call
    ``bf16_support.cache_clear()``.
    """
    capability = torch.backends.cpu.get_cpu_capability()
    flags = cpu_flags()
    found = sorted(f for f in BF16_FLAGS if f in flags)
    if platform.machine().lower() not in ("aarch64", "arm64"):
        found = [f for f in found if f != "bf16"]  # "bf16" alone is an Arm feature name
    by_torch = _torch_says_bf16()
    cpu = f"torch CPU capability {capability}"
    if found or by_torch:
        evidence = ", ".join(found) if found else "torch.cpu AVX512-BF16/AMX check"
        cap = onednn_cap()
        if cap is None:
            return True, f"native bf16 ({evidence}; {cpu})"
        mask = ONEDNN_ISA_MASKS.get(cap[1].upper())
        if mask is None:
            return True, (f"native bf16 ({evidence}; {cpu}; {cap[0]}={cap[1]} is not an ISA name known here, "
                          f"assumed not to cap bf16)")
        if mask & ONEDNN_BF16_MASK != ONEDNN_BF16_MASK:
            return False, (f"no native bf16 for the GEMMs: the CPU has it ({evidence}) but {cap[0]}={cap[1]} holds "
                           f"oneDNN below AVX512_CORE_BF16, so bf16 runs emulated through float32 conversions "
                           f"(unset it to use bf16)")
        return True, f"native bf16 ({evidence}; {cpu}; {cap[0]}={cap[1]} keeps it)"
    return False, (f"no native bf16 on this CPU ({cpu}; no avx512_bf16 / amx_bf16 in the CPU flags): bf16 runs "
                   f"emulated through float32 conversions")


def cpu_model(path="/proc/cpuinfo"):
    """The CPU's model name from ``/proc/cpuinfo`` (else ``platform.processor()``)."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# Environment variables that cap the instruction set torch's and oneDNN's kernels use below what the CPU has.
ISA_CAPS = ("ATEN_CPU_CAPABILITY", *ONEDNN_CAPS)


def describe():
    """One line naming the CPU, its vector/bf16 features and torch's view of it (benchmarks print it), and the
    kernel caps in force (``ISA_CAPS``, e.g. an AVX-512 CPU run as an AVX2 one), so a figure says what ran."""
    flags = cpu_flags()
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags]
    native, _ = bf16_support()
    caps = " ".join(f"{k}={os.environ[k]}" for k in ISA_CAPS if os.environ.get(k))
    return (f"{cpu_model()}, {os.cpu_count()} logical cores, flags {' '.join(isa) or 'none of avx2/avx512'}, torch "
            f"capability {torch.backends.cpu.get_cpu_capability()}, native bf16 {'yes' if native else 'no'}, torch "
            f"{torch.__version__}" + (f", kernels capped: {caps}" if caps else ""))


def has_native_bf16():
    """True where bf16 autocast can be faster than float32 on this CPU (see ``bf16_support``)."""
    return bf16_support()[0]


# -- int8 linears: the fast path where bf16 is emulated ---------------------------------------------------------------

def int8_dynamic(model, inplace=False):
    """``model`` for CPU inference with its ``nn.Linear`` layers dynamically quantised to int8 (a copy, or the model
    itself with ``inplace=True``, e.g. inside an mmengine runner: ``tools/test.py --int8``): weights
    int8 per output channel, activations quantised per batch at run time, int32 accumulation (torch's quantised
    engine, fbgemm / x86 on x86-64). The input, the output and everything between the linears stay float32.

    This is the faster path on a CPU without native bf16 (``has_native_bf16()`` False), where bf16 autocast is
    several times slower than float32: on an AVX2-only EPYC it ran ``sa_vit_small`` / ``sa_vit_base`` (batch 8,
    224 px) 1.2-1.5x faster than float32 eager (docs/BENCHMARKS.md, "A faster path without native bf16"). It rounds
    more than bf16 does: check top-1 on your data (the bundled Fashion-MNIST classifiers, same docs section).
    It is a classifier's fast path, not a segmentor's: the 192-wide ``*_vit_tiny`` light-head segmentors at 1024 and
    2048 px ran 0.6-1.05x their float32 speed with it (``ea`` slowest: its folded, token-blocked forward needs plain
    ``nn.Linear`` layers and falls back to the step-by-step one; docs/segmentation.md, "int8 linears").

    torch marks this eager-mode API (``torch.ao.quantization.quantize_dynamic``) as deprecated in favour of torchao,
    whose int8 linears run fast on CPU only under ``torch.compile`` (30x slower than float32 in eager here); its
    deprecation warning is not repeated on every call. Without ``inplace`` the model is left untouched (a deep copy
    is quantised). It must be in eval mode; the result runs on CPU only.
    """
    import copy
    import warnings
    quant = getattr(getattr(torch, "ao", None), "quantization", None)
    if quant is None or not hasattr(quant, "quantize_dynamic"):
        raise RuntimeError(f"int8_dynamic needs torch.ao.quantization.quantize_dynamic, which torch "
                           f"{torch.__version__} no longer has; run in float32 (or bf16 on a CPU with native bf16)")
    if model.training:
        raise ValueError("int8_dynamic quantises for inference: call model.eval() first")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.ao\.quantization is deprecated")
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated")
        return quant.quantize_dynamic(model if inplace else copy.deepcopy(model),
                                      {torch.nn.Linear: quant.per_channel_dynamic_qconfig}, dtype=torch.qint8,
                                      inplace=True)


def fast_path():
    """``(name, reason)``: the classifier inference path to try first on this CPU for speed, beyond float32:
    ``"bf16"`` (``torch.autocast("cpu", dtype=torch.bfloat16)``) where bf16 is native, else ``"int8"``
    (``int8_dynamic``; measured for classifiers, see its docstring for segmentors)."""
    native, reason = bf16_support()
    if native:
        return "bf16", reason
    return "int8", f"{reason}; int8 linears (int8_dynamic) instead"


# -- one row's peak memory ------------------------------------------------------------------------------------------
def _status_mb(keys=("VmHWM", "VmRSS")):
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in keys:
                out[key] = int(val.split()[0]) / 1024
    return out


def _trim():
    """Give the allocator's free memory back to the system (glibc ``malloc_trim``), so RSS is the live set."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_rss_resettable():
    """True where the process peak RSS can be reset (Linux ``/proc/self/clear_refs``, writing ``5``)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakMemory:
    """Peak memory of one benchmark row, measured for that row alone (not the process maximum).

    ``with PeakMemory(device) as pm: <build the model, run it>`` then ``pm.mb``: on CUDA the growth of
    ``torch.cuda.max_memory_allocated`` over what was allocated at entry (the peak is reset at entry); on CPU the
    growth of the peak resident set (``VmHWM``, reset at entry through ``/proc/self/clear_refs``) over the resident
    set at entry, after garbage collection and ``malloc_trim`` returned the previous rows' freed memory. So a row
    counts what it allocates inside the block (weights built there, activations, workspace), and a small row after a
    big one reports a small number. ``mb`` is None where neither is available (``how`` says so).
    """

    def __init__(self, device="cpu"):
        self.device = str(device)
        self.mb = None
        self.how = None

    def __enter__(self):
        gc.collect()
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._before = torch.cuda.memory_allocated()
            self.how = "CUDA max allocated, growth in the row"
        elif os.path.exists("/proc/self/status") and peak_rss_resettable():
            _trim()
            self._before = _status_mb()["VmRSS"]
            peak_rss_resettable()  # reset VmHWM to the current RSS
            self.how = "peak RSS growth in the row (VmHWM reset)"
        else:
            self.how = "unavailable (no /proc/self/clear_refs)"
        return self

    def __exit__(self, *exc):
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
            self.mb = round((torch.cuda.max_memory_allocated() - self._before) / 2 ** 20, 1)
        elif self.how.startswith("peak RSS"):
            self.mb = round(_status_mb()["VmHWM"] - self._before, 1)
        return False
