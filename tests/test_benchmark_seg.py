"""tools/benchmark.py's "seg end to end" section on micro models: a row's worker (memory of the first call, then
torch.utils.benchmark timings), the skip rules (extrapolated time / memory, ff trains at its crop only) and the table
with ratios against sa. The full section runs only by hand (minutes); one subprocess round trip is a slow test."""
import json
import os

import pytest
import torch

from tests.load_tool import load_tool

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench():
    return load_tool("benchmark")


@pytest.mark.parametrize("head", ["segformer", pytest.param("uper", marks=pytest.mark.slow)])  # uper: 512 ch
def test_seg_worker_row(bench, capsys, head):
    job = dict(head=head, mixer="ea", res=64, tokens=16, mode="train", batch=2, size="micro", min_run_time=0.01)
    bench.seg_worker(job)
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["ms"] > 0 and row["runs"] >= 1 and len(row["times"]) == row["runs"]
    assert row["peak_mb"] is None or row["peak_mb"] > 0
    bench.seg_worker(dict(job, mode="infer", batch=1))
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["ms"] > 0


def test_seg_worker_train_cp_checkpoints_the_blocks(bench, capsys, monkeypatch):
    import torch.utils.checkpoint as cp
    calls, real = [], cp.checkpoint
    monkeypatch.setattr(cp, "checkpoint", lambda *a, **k: calls.append(1) or real(*a, **k))
    job = dict(head="segformer", mixer="effa", res=64, tokens=16, mode="train", batch=2, size="micro",
               min_run_time=0.01)
    bench.seg_worker(job)
    assert calls == []
    bench.seg_worker(dict(job, mode="train-cp"))
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["mode"] == "train-cp" and row["ms"] > 0 and len(calls) >= 4  # 4 blocks per step at least


def test_seg_worker_train_mmseg_uses_mmseg_losses(bench, capsys, monkeypatch):
    import zoo.heads.seg as seg  # mmcv's compiled-ops stand-in before mmseg's models
    used = []
    real = seg.head_loss
    monkeypatch.setattr(seg, "head_loss", lambda *a, **k: used.append(a[4]) or real(*a, **k))
    job = dict(head="segformer", mixer="ea", res=64, tokens=16, mode="train-mmseg", batch=2, size="micro",
               min_run_time=0.01)
    bench.seg_worker(job)
    assert used and not any(used)  # low_memory=False for the decode and auxiliary heads, every call
    n = len(used)
    bench.seg_worker(dict(job, mode="train"))
    assert len(used) > n and all(used[n:])


def test_seg_skip_rules(bench):
    args = bench.parse_args(["--seg-max-seconds", "100"])
    ff = dict(head="segformer", mixer="ff", res=1024, tokens=4096, mode="train")
    assert "crop only" in bench.seg_skip_reason(ff, [], args)
    assert "crop only" in bench.seg_skip_reason(dict(ff, mode="train-cp"), [], args)
    assert bench.seg_skip_reason(dict(ff, mode="infer"), [], args) is None
    hist = [dict(res=512, tokens=1024, ms=1000.0, peak_mb=100.0), dict(res=1024, tokens=4096, ms=16000.0,
                                                                     peak_mb=400.0)]
    row = dict(head="segformer", mixer="sa", res=2048, tokens=16384, mode="train")
    reason = bench.seg_skip_reason(row, hist, args)  # quadratic time: 256 s > 100 s; linear memory: 1.6 GB
    assert reason.startswith("skipped: estimated 256 s per call, 1.6 GiB peak") and "--seg-max-seconds" in reason
    assert row["estimated_mb"] == 1600
    assert bench.seg_skip_reason(dict(row, mixer="ea"), hist[:1], args) is None  # linear: 16 s


def test_seg_table_ratios(bench):
    rows = [dict(head="segformer", res=1024, mixer="sa", mode="infer", ms=3000.0, peak_mb=50.0),
            dict(head="segformer", res=1024, mixer="ea", mode="infer", ms=1000.0, peak_mb=20.0),
            dict(head="segformer", res=1024, mixer="sa", mode="train", note="skipped", estimated_mb=900),
            dict(head="segformer", res=1024, mixer="ea", mode="train", ms=2000.0, peak_mb=70.0)]
    t = {r["mixer"]: r for r in bench.seg_table(rows, "segformer")}
    assert t["ea"]["infer x sa"] == 3.0 and t["sa"]["infer x sa"] == 1.0
    assert t["ea"]["train step x sa"] == "-" and t["sa"]["train step MB"] == "~900 (est.)"
    assert not any("checkpointing" in k for k in t["ea"])  # the optional column only when measured
    rows += [dict(head="segformer", res=1024, mixer="ea", mode="train-cp", ms=2600.0, peak_mb=30.0)]
    t = {r["mixer"]: r for r in bench.seg_table(rows, "segformer")}
    assert t["ea"]["train step (checkpointing) MB"] == 30.0 and t["sa"]["train step (checkpointing) s"] == "-"


@pytest.mark.slow  # two fresh processes importing mmseg
def test_seg_section_end_to_end(bench, tmp_path):
    args = bench.parse_args(["--only", "seg", "--seg-model-size", "micro", "--seg-sizes", "64", "--seg-mixers",
                             "sa,ea", "--seg-heads", "segformer", "--min-run-time", "0.05", "--out", str(tmp_path)])
    args.threads = 1
    rows = bench.bench_seg(args)
    assert [(r["mixer"], r["mode"]) for r in rows if "ms" in r] == [("sa", "infer"), ("sa", "train"),
                                                                     ("ea", "infer"), ("ea", "train")]


def test_seg_resize_section_compares_the_three_ways(bench):
    args = bench.parse_args(["--only", "seg-resize", "--seg-model-size", "micro", "--seg-heads-res", "64",
                             "--seg-mixers", "sa,ff", "--repeats", "2"])
    rows = bench.bench_seg_resize(args)
    assert [r["mixer"] for r in rows] == ["sa"]  # ff slides its crop: not this path
    row = rows[0]
    assert row["pixels_differing"] == {"channels_last": 0, "labels_only": 0} and row["rounds"] == 2
    # the speed-ups are of the unrounded medians: they lie within the bounds the 3-decimal seconds allow
    n, h = row["nchw_s"], 0.0005
    for way in ("channels_last", "labels_only"):
        c = row[f"{way}_s"]
        assert c > 0 and (n - h) / (c + h) - 0.005 <= row[f"{way}_x"] <= (n + h) / max(c - h, 1e-9) + 0.005


def test_seg_heads_section_times_the_fused_light_head(bench, monkeypatch):
    from zoo.heads import light_head
    fused = []
    real = light_head.fused_forward
    monkeypatch.setattr(light_head, "fused_forward", lambda *a: fused.append(1) or real(*a))
    args = bench.parse_args(["--only", "seg-heads", "--seg-model-size", "micro", "--seg-heads-res", "64",
                             "--min-run-time", "0.01"])
    rows = bench.bench_seg_heads(args)
    labels = [r["neck_and_head"] for r in rows]
    assert labels[-2:] == ["light head, channels-last maps", "light head, channels-last maps, fused "
                           "(zoo.heads.light_head)"]
    assert all(r["ms"] > 0 and r["px"] == 64 for r in rows)
    assert len(fused) >= 2  # the fused row's warm-up and timed calls


def test_mlp_chunk_section_times_both_ways_with_the_same_labels(bench, monkeypatch):
    import zoo.layers.mlp as M
    monkeypatch.setattr(M, "CHUNK_ROWS", 64)
    monkeypatch.setattr(M, "CHUNK_MIN_BYTES", 0)
    blocks = []
    real = M.Mlp._chunked
    monkeypatch.setattr(M.Mlp, "_chunked", lambda self, x, rows: blocks.append(rows) or real(self, x, rows))
    args = bench.parse_args(["--only", "mlp-chunk", "--seg-model-size", "micro", "--seg-sizes", "256",
                             "--seg-mixers", "ea,ff", "--repeats", "2"])
    rows = bench.bench_mlp_chunk(args)
    assert [(r["mixer"], r["px"], r["pixels_differing"], r["rounds"]) for r in rows] == [("ea", 256, 0, 2)]
    assert rows[0]["one_shot_s"] > 0 and rows[0]["blocks_s"] > 0
    assert blocks and set(blocks) == {64}  # the blocks ran (256 tokens), the one-shot rounds did not
    assert len(blocks) == 3 * 4  # micro's 4 blocks, in the warm-up and the 2 timed "blocks" rounds
    assert M.CHUNK_ROWS == 64  # restored


def test_mlp_gelu_section_times_both_ways_with_the_same_labels(bench, monkeypatch):
    import zoo.layers.mlp as M
    flags = []
    real = M.Mlp._hidden
    monkeypatch.setattr(M.Mlp, "_hidden", lambda self, x: flags.append(M.INPLACE_GELU) or real(self, x))
    args = bench.parse_args(["--only", "mlp-gelu", "--seg-model-size", "micro", "--seg-sizes", "256",
                             "--seg-mixers", "ea", "--repeats", "2"])
    rows = bench.bench_mlp_gelu(args)
    assert [(r["mixer"], r["px"], r["pixels_differing"], r["rounds"]) for r in rows] == [("ea", 256, 0, 2)]
    assert rows[0]["in_place_s"] > 0 and rows[0]["new_tensor_s"] > 0
    assert len(flags) == 3 * 4  # micro's 4 MLPs in place in the warm-up and the 2 "in_place" rounds, never else
    assert M.INPLACE_GELU is True  # restored


def test_head_paths_section_times_the_fused_head_against_mmseg(bench, monkeypatch):
    from zoo.heads import light_head
    from zoo.heads.seg import ZooViTBackbone
    fused, layouts = [], []
    real, backbone = light_head.fused_forward, ZooViTBackbone.forward
    monkeypatch.setattr(light_head, "fused_forward", lambda *a: fused.append(1) or real(*a))
    monkeypatch.setattr(ZooViTBackbone, "forward", lambda self, x: layouts.append(self.channels_last_maps) or
                        backbone(self, x))
    args = bench.parse_args(["--only", "head-paths", "--seg-model-size", "micro", "--seg-sizes", "128",
                             "--seg-mixers", "effa,ff", "--repeats", "2"])
    rows = bench.bench_head_paths(args)
    assert [(r["mixer"], r["px"], r["pixels_differing"], r["rounds"]) for r in rows] == [("effa", 128, 0, 2)]
    assert rows[0]["fused_s"] > 0 and rows[0]["mmseg_s"] > 0
    # warm-up and 2 rounds, each the fused way (channels-last maps, the fused head) then mmseg's (NCHW maps, the
    # head's own forward, which never reaches fused_forward)
    assert layouts == [True, False] * 3 and fused == [1] * 3, (layouts, fused)
    assert light_head.fused_forward is not real  # this test's wrapper again: the section restored what it found


def test_seg_rounds_section_interleaves_the_mixers(bench, monkeypatch):
    import zoo.heads.seg as seg
    order = []
    real = seg.ZooEncoderDecoder.predict
    monkeypatch.setattr(seg.ZooEncoderDecoder, "predict", lambda self, *a, **k: order.append(
        self.backbone.name.split("_")[0]) or real(self, *a, **k))
    args = bench.parse_args(["--only", "seg-rounds", "--seg-model-size", "micro", "--seg-sizes", "64",
                             "--seg-mixers", "sa,ff,effa", "--repeats", "2"])
    rows = bench.bench_seg_rounds(args)
    assert order == ["sa", "effa"] * 3  # warm-up, then the rounds alternate the mixers (ff slides: left out)
    by = {r["mixer"]: r for r in rows}
    assert set(by) == {"sa", "effa"} and by["sa"]["x_sa"] == 1 and len(by["effa"]["times"]) == 2
    assert by["effa"]["x_sa"] > 0 and by["effa"]["infer_s"] > 0
    assert by["effa"]["x_sa_flops"] == pytest.approx(by["sa"]["gflop"] / by["effa"]["gflop"], abs=0.01)
    assert by["sa"]["gflop"] > 0 and by["sa"]["x_sa_flops"] == 1
    assert all(isinstance(r["minor_faults"], int) and r["minor_faults"] >= 0 for r in rows)


def test_minor_faults_counts_the_pages_a_fresh_buffer_touches(bench):
    """``minor_faults`` (the seg rounds' per-call column) grows by about one per 4 KiB page when a fresh mapping is
    written, and not when memory the process already touched is written again."""
    import mmap
    m = mmap.mmap(-1, 64 << 20)  # 64 MiB of anonymous memory, not yet touched
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        m.madvise(mmap.MADV_NOHUGEPAGE)  # 4 KiB pages, so that each page faults once
    before = bench.minor_faults()
    for i in range(0, len(m), 4096):
        m[i] = 1
    first = bench.minor_faults() - before
    before = bench.minor_faults()
    for i in range(0, len(m), 4096):
        m[i] = 2
    again = bench.minor_faults() - before
    m.close()
    if first == 0:
        pytest.skip("this kernel or sandbox reports no minor page faults (getrusage ru_minflt stays 0)")
    assert first >= (64 << 20) // 4096 // 2
    assert again < first // 10



def test_seg_rounds_int8_adds_each_model_with_int8_linears(bench, monkeypatch):
    """``--seg-int8``: "{mixer} int8" rows, same GFLOP, timed in the same rounds, with their float32 time over theirs;
    the float32 models keep their linears (int8_dynamic quantises copies)."""
    import torch.nn as nn
    from torch.ao.nn.quantized.dynamic import Linear as Int8Linear
    args = bench.parse_args(["--only", "seg-rounds", "--seg-model-size", "micro", "--seg-sizes", "64",
                             "--seg-mixers", "sa,ea", "--repeats", "2", "--seg-int8"])
    from zoo import cpu
    seen, real = {}, cpu.int8_dynamic

    def spy(model, inplace=False):
        q = real(model, inplace=inplace)
        seen[model.backbone.name] = (model, q)
        return q
    monkeypatch.setattr(cpu, "int8_dynamic", spy)
    rows = bench.bench_seg_rounds(args)
    by = {r["mixer"]: r for r in rows}
    assert set(by) == {"sa", "ea", "sa int8", "ea int8"}
    for mixer in ("sa", "ea"):
        r, q = by[f"{mixer} int8"], by[mixer]
        assert r["gflop"] == q["gflop"] and len(r["times"]) == 2 and r["x_fp32"] > 0 and "x_fp32" not in q
        model, quantised = seen[f"{mixer}_vit_micro"]
        assert any(type(m) is nn.Linear for m in model.modules())
        assert any(type(m) is Int8Linear for m in quantised.modules())
        assert not any(type(m) is nn.Linear for m in quantised.backbone.modules())

def test_seg_gflop_of_micro_segmentors_by_hand(bench):
    """sa and ea light-head micro segmentors at 64 px, patch 16: 16 patches + the class token = 17 tokens of width
    64, 4 blocks, MLP 256. Their patch embedding, neck and head are the same, so the difference of the counts is the
    mixers' products alone, written out from the papers' layouts (not read from the code under test):
    sa: qkv (C -> 3C), the two attention products over N tokens (2 N^2 C multiply-adds in all), proj (C -> C);
    ea with 2 heads x 4 (expansion) = 8 heads of width 32 and S = 64 slots: trans_dims folded with M_k into one
    C -> 8*64 product, M_v folded with proj into one 8*64 -> C product, and the folding itself (8 products of
    (64 x 32)(32 x 64) for M_k, (64*8 x 32)(32 x 64) for M_v, (8 x 32)(32 x 64) for the logits' bias)."""
    import zoo
    N, C, depth, H, S, d = 17, 64, 4, 8, 64, 32
    counts = {}
    for mixer in ("sa", "ea"):
        model = zoo.load(f"{mixer}_vit_micro", task="seg", num_classes=11, img_size=64, decode_head="segformer")
        counts[mixer] = bench.seg_gflop(model.eval(), 64) * 1e9
        assert next(model.parameters()).device.type == "cpu"  # counted on a meta copy, the model stays
    sa = 2 * N * C * 3 * C + 2 * 2 * N * N * C + 2 * N * C * C
    ea = 2 * N * C * H * S + 2 * N * H * S * C + 2 * H * S * d * C + 2 * C * H * d * S + 2 * H * d * S
    assert counts["sa"] - counts["ea"] == pytest.approx(depth * (sa - ea), rel=1e-3)
    assert counts["sa"] > 2 * N * C * 4 * C * 2 * depth  # and at least the MLPs (the rest is embedding and head)


def test_seg_modes_option(bench, capsys):
    assert bench.parse_args(["--seg-modes", "infer"]).seg_modes == ["infer"]
    assert bench.parse_args(["--seg-modes", "train,train-cp,train-mmseg"]).seg_modes == ["train", "train-cp",
                                                                                         "train-mmseg"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--seg-modes", "infer,eval"])
    assert "--seg-modes: unknown ['eval']" in capsys.readouterr().err


def test_linear_section_restores_the_fast_path(bench):
    import zoo.layers.linear as L
    default = L._ONEDNN_LINEAR
    args = bench.parse_args(["--only", "linear", "--models", "sa_vit_micro", "--batch", "2", "--img-size", "64",
                             "--repeats", "2"])
    rows = bench.bench_linear(args)
    assert L._ONEDNN_LINEAR is default  # the CPU's choice is back, whatever the benchmark switched
    if L.ONEDNN_OP is not None:  # compared on every CPU, also where it is off by default
        assert rows[0]["model"] == "sa_vit_micro" and rows[0]["runs"] == 2 and rows[0]["F.linear / oneDNN"] > 0


def test_gemm_shapes_of_a_micro_vit_by_hand(bench):
    """sa_vit_micro at 28 px, patch 4, batch 2: 49 patches + the class token = 50 tokens per image, width 64, MLP 256,
    4 blocks, 10 classes (the shapes written out from the architecture, not read from the code under test)."""
    import zoo
    m = zoo.load("sa_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4).eval()
    shapes = bench.gemm_shapes(m, torch.randn(2, 1, 28, 28))
    d, t = 64, 2 * 50
    assert shapes == {(2 * 49, 1 * 4 * 4, d, True): 1,  # the patch embedding as a GEMM of its patches
                      (t, d, 3 * d, True): 4, (t, d, d, True): 4,  # qkv and proj per block
                      (t, d, 4 * d, True): 4, (t, 4 * d, d, True): 4,  # the MLP
                      (2, d, 10, True): 1}  # the head on the class token
    assert not any(mod._forward_hooks for mod in m.modules())  # the recording hooks are gone


def test_attention_products_of_a_micro_vit_by_hand(bench):
    """sa_vit_micro at 28 px, batch 2: 4 blocks, each one attention of 2 heads of width 64 / 2 = 32 over 50 tokens
    per image; the ea mixer has no softmax attention to record."""
    import zoo
    m = zoo.load("sa_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4).eval()
    assert bench.attention_products(m, torch.randn(2, 1, 28, 28)) == {(2 * 2, 50, 32): 4}
    assert not any(mod._forward_pre_hooks for mod in m.modules())
    ea = zoo.load("ea_vit_micro", num_classes=10, img_size=28, in_chans=1, patch_size=4).eval()
    assert bench.attention_products(ea, torch.randn(2, 1, 28, 28)) == {}


def test_gemm_section_reports_a_share(bench):
    args = bench.parse_args(["--only", "gemm", "--models", "sa_vit_micro", "--batch", "2", "--img-size", "32",
                             "--min-run-time", "0.02", "--repeats", "3"])
    row, = bench.bench_gemm(args)
    assert row["model"] == "sa_vit_micro" and row["gemms"] == 1 + 4 * 4 + 1 and row["shapes"] == 6
    assert row["rounds"] == 3 and row["per-round ratio (median)"] > 0
    assert 0 < row["model / GEMM rate"] and row["gemm_gflops"] > 0
    assert abs(row["model / GEMM rate"] - row["gemms_alone_ms"] / row["model_ms"]) < 1e-9
    assert row["attentions"] == 4 and row["attn_products_alone_ms"] > 0
    with_attn = (row["gemms_alone_ms"] + row["attn_products_alone_ms"]) / row["model_ms"]
    assert abs(row["with attention products"] - with_attn) < 1e-9 and with_attn > row["model / GEMM rate"]


def test_saved_for_backward_counts_what_autograd_keeps(bench):
    """relu(x @ w): the product keeps x and w (excluded: input and weight), relu keeps its 5 x 7 float32 output."""
    x, w = torch.randn(5, 3, requires_grad=True), torch.randn(3, 7, requires_grad=True)
    out, mb = bench.saved_for_backward_mb(lambda: torch.relu(x @ w), exclude=[x, w])
    assert out.shape == (5, 7) and mb == 5 * 7 * 4 / 2 ** 20
    assert bench.saved_for_backward_mb(lambda: torch.relu(x @ w))[1] == (5 * 3 + 3 * 7 + 5 * 7) * 4 / 2 ** 20


def test_mixers_train_section_rows(bench):
    args = bench.parse_args(["--only", "mixers-train", "--train-tokens", "16", "--dim", "24", "--heads", "3",
                             "--repeats", "2"])
    rows = bench.bench_mixers_train(args)
    assert [r["mixer"] for r in rows] == ["sa", "ea", "effa", "ff"]
    assert all(r["tokens"] == 16 and r["ms"] > 0 and r["runs"] == 2 and r["saved_mb"] > 0 for r in rows)
    assert rows[0]["x_sa"] == 1.0


def test_only_names_an_unknown_section(bench, capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--only", "mixers,segheads"])
    assert "--only: unknown section(s) segheads; choose from mixers, mixers-train" in capsys.readouterr().err


def test_seg_rounds_bf16_adds_each_model_under_autocast(bench, monkeypatch):
    """``--seg-bf16``: "{mixer} bf16" rows timed in the same rounds under bf16 autocast (forced on with
    ``--emulated-bf16`` so the test runs on any CPU), with their float32 time over theirs and ``sa``'s bf16 time over
    theirs; ``predict`` sees autocast on for those rows only."""
    import torch
    args = bench.parse_args(["--only", "seg-rounds", "--seg-model-size", "micro", "--seg-sizes", "64",
                             "--seg-mixers", "sa,ea", "--repeats", "2", "--seg-bf16", "--emulated-bf16"])
    seen = []
    real = bench._light_model

    def spy_model(a, mixer):
        model = real(a, mixer)
        inner = model.predict
        model.predict = lambda x: seen.append((mixer, torch.is_autocast_enabled("cpu"))) or inner(x)
        return model
    monkeypatch.setattr(bench, "_light_model", spy_model)
    rows = bench.bench_seg_rounds(args)
    by = {r["mixer"]: r for r in rows}
    assert set(by) == {"sa", "ea", "sa bf16", "ea bf16"}
    assert {(m, True) for m in ("sa", "ea")} <= set(seen) and {(m, False) for m in ("sa", "ea")} <= set(seen)
    assert by["ea bf16"]["x_sa_same_precision"] == pytest.approx(by["sa bf16"]["infer_s"] / by["ea bf16"]["infer_s"],
                                                                  rel=0.02, abs=0.01)
    assert by["ea bf16"]["x_fp32"] > 0 and "x_fp32" not in by["ea"]


def test_ea_chunk_section_times_the_default_blocks_against_512(bench, monkeypatch):
    from zoo.mixers.ea import ExternalAttention
    seen = []
    real = ExternalAttention.token_block
    monkeypatch.setattr(ExternalAttention, "token_block", lambda self, x: seen.append(self.chunk_tokens) or
                        real(self, x))
    args = bench.parse_args(["--only", "ea-chunk", "--seg-model-size", "micro", "--seg-sizes", "512",
                             "--seg-mixers", "ea", "--repeats", "2"])
    rows = bench.bench_ea_chunk(args)
    assert [(r["mixer"], r["px"], r["rounds"]) for r in rows] == [("ea", 512, 2)]
    assert rows[0]["default_s"] > 0 and rows[0]["chunk512_s"] > 0
    assert rows[0]["pixels_differing"] <= 8  # 1,025 tokens in 2 blocks or 3: float rounding at most
    # micro's 4 mixers, twice per call (the two passes), in the warm-up and the 2 rounds, default first
    assert seen == ([1024] * 8 + [512] * 8) * 3, seen
    assert ExternalAttention.chunk_tokens == 1024  # restored
