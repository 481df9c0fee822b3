"""Each mixer against its paper's formula, computed independently here from the module's raw weights.

The references below use explicit per-head loops and hand-written normalisations on purpose: they share no
code with ``zoo.mixers`` beyond reading parameter tensors by their official names.
"""
import copy
import math

import pytest
import torch

from zoo import mixers

B, N, C, H = 2, 7, 24, 3


def _linear(x, lin):
    return x @ lin.weight.t() + (lin.bias if lin.bias is not None else 0)


def _randomise(m):
    with torch.no_grad():
        for p in m.parameters():
            p.normal_(0, 0.5)
    return m.eval()


def ref_sa(m, x):
    d = C // H
    qkv = _linear(x, m.qkv)
    q, k, v = qkv[..., :C], qkv[..., C:2 * C], qkv[..., 2 * C:]
    heads = []
    for h in range(H):
        sl = slice(h * d, (h + 1) * d)
        logits = q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(d)
        heads.append(torch.softmax(logits, dim=-1) @ v[..., sl])  # softmax over keys
    return _linear(torch.cat(heads, dim=-1), m.proj)


def ref_ea(m, x):
    d = C // H
    xt = _linear(x, m.trans_dims)  # (B, N, 4C)
    outs = []
    for h in range(4 * H):
        xh = xt[..., h * d:(h + 1) * d]  # (B, N, d)
        a = _linear(xh, m.linear_0)  # (B, N, S)
        a = torch.exp(a - a.max(dim=1, keepdim=True).values)
        a = a / a.sum(dim=1, keepdim=True)  # softmax over the token axis N
        a = a / (a.sum(dim=2, keepdim=True) + 1e-9)  # l1 over the memory axis S
        outs.append(_linear(a, m.linear_1))
    return _linear(torch.cat(outs, dim=-1), m.proj)


def ref_effa(m, x):
    q, k, v = _linear(x, m.queries), _linear(x, m.keys), _linear(x, m.values)
    dk, dv = q.shape[-1] // H, v.shape[-1] // H
    outs = []
    for h in range(H):
        qh = torch.softmax(q[..., h * dk:(h + 1) * dk], dim=2)  # over channels
        kh = torch.softmax(k[..., h * dk:(h + 1) * dk], dim=1)  # over tokens
        vh = v[..., h * dv:(h + 1) * dv]
        context = kh.transpose(1, 2) @ vh  # (B, dk, dv)
        outs.append(qh @ context)
    return _linear(torch.cat(outs, dim=-1), m.reprojection)


def ref_ff(m, x):
    t = x.transpose(1, 2)  # (B, C, N): the MLP runs along tokens
    mu = t.mean(dim=-1, keepdim=True)
    var = ((t - mu) ** 2).mean(dim=-1, keepdim=True)
    t = (t - mu) / torch.sqrt(var + m.norm.eps) * m.norm.weight + m.norm.bias
    h = _linear(t, m.fc1)
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # exact GELU
    return _linear(h, m.fc2).transpose(1, 2)


REFS = {"sa": ref_sa, "ea": ref_ea, "effa": ref_effa, "ff": ref_ff}


def test_every_mixer_has_a_reference_and_a_paper():
    assert set(REFS) == set(mixers.MIXERS) == set(mixers.list_mixers())


@pytest.mark.parametrize("name", sorted(REFS))
def test_mixer_matches_paper_formula(name):
    torch.manual_seed(1)
    m = _randomise(mixers.build(name, dim=C, num_heads=H, num_tokens=N))
    x = torch.randn(B, N, C, dtype=torch.float64)
    m = m.double()
    with torch.no_grad():
        out = m(x)
        ref = REFS[name](m, x)
    assert out.shape == (B, N, C)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    with torch.no_grad():  # eval mode: the inference paths (ea's leaves out the logits' bias, which softmax cancels)
        torch.testing.assert_close(m.eval()(x), ref, atol=1e-5, rtol=0)


def test_official_parameter_names():
    names = {n: {k for k, _ in mixers.build(n, dim=C, num_heads=H, num_tokens=N).named_parameters()}
             for n in mixers.MIXERS}
    assert names["sa"] == {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}
    assert {k.split(".")[0] for k in names["ea"]} == {"trans_dims", "linear_0", "linear_1", "proj"}
    assert {k.split(".")[0] for k in names["effa"]} == {"queries", "keys", "values", "reprojection"}
    assert {k.split(".")[0] for k in names["ff"]} == {"norm", "fc1", "fc2"}


def test_ea_shapes_and_initialisation():
    m = mixers.build("ea", dim=C, num_heads=H)
    assert m.linear_0.weight.shape == (64, C // H)  # S = 64 memory slots by default
    assert m.trans_dims.weight.shape == (4 * C, C) and m.proj.weight.shape == (C, 4 * C)
    torch.testing.assert_close(m.linear_1.weight, m.linear_0.weight.t())  # M_v starts as M_k^T
    assert mixers.build("ea", dim=C, num_heads=H, memory_size=16).linear_0.out_features == 16


def test_ea_weights_over_memory_sum_to_one():
    m = _randomise(mixers.build("ea", dim=C, num_heads=H, memory_size=32))
    seen = {}
    m.linear_1.register_forward_pre_hook(lambda mod, args: seen.setdefault("attn", args[0]))
    with torch.no_grad():
        m(torch.randn(B, N, C))
    attn = seen["attn"]
    assert attn.shape == (B, 4 * H, N, 32)
    torch.testing.assert_close(attn.sum(dim=-1), torch.ones(B, 4 * H, N))
    # before the l1 step the map was a softmax over tokens, so no token-axis sum is 1 in general
    assert not torch.allclose(attn.sum(dim=-2), torch.ones(B, 4 * H, 32))


@pytest.mark.parametrize("n_tokens", [5, 50, 500])
def test_effa_context_is_independent_of_token_count(n_tokens):
    m = mixers.build("effa", dim=C, num_heads=H, key_dim=12, value_dim=18)
    ctx = m.context(torch.randn(B, n_tokens, C))
    assert ctx.shape == (B, H, 12 // H, 18 // H)
    assert m(torch.randn(B, n_tokens, C)).shape == (B, n_tokens, C)


def test_ff_refuses_another_token_count():
    m = mixers.build("ff", dim=C, num_heads=H, num_tokens=N)
    with pytest.raises(ValueError, match=f"built for {N} tokens but got {N + 1}"):
        m(torch.randn(B, N + 1, C))
    with pytest.raises(ValueError, match="needs num_tokens"):
        mixers.build("ff", dim=C, num_heads=H)


@pytest.mark.parametrize("name", ["sa", "ea", "effa"])
def test_variable_length_mixers_accept_any_token_count(name):
    m = mixers.build(name, dim=C, num_heads=H)
    for n in (1, 3, 64):
        assert m(torch.randn(1, n, C)).shape == (1, n, C)


def test_sa_uses_scaled_dot_product_attention(monkeypatch):
    import torch.nn.functional as F
    calls = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    mixers.build("sa", dim=C, num_heads=H)(torch.randn(B, N, C))
    assert calls == [1]


def test_unknown_mixer_lists_close_matches():
    with pytest.raises(KeyError, match="Did you mean effa"):
        mixers.build("efa", dim=C, num_heads=H)


@pytest.mark.parametrize("name", ["ea", "effa"])
@pytest.mark.parametrize("chunk", [3, 4])
def test_token_blocked_forward_matches_paper_formula(name, chunk):
    """Long sequences run in token blocks (``chunk_tokens``) with a log-sum-exp merge of the softmax over tokens;
    blocks of 3 and 4 over N = 7 exercise full and ragged blocks against the same reference (ea blocks at
    inference only; its autograd path is checked with autograd on)."""
    torch.manual_seed(2)
    m = _randomise(mixers.build(name, dim=C, num_heads=H)).double()
    m.chunk_tokens = chunk
    x = torch.randn(B, N, C, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        torch.testing.assert_close(m(x), REFS[name](m, x), atol=1e-5, rtol=0)
    out = m(x)
    ref = REFS[name](m, x)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    g_out, = torch.autograd.grad(out.square().sum(), x)
    g_ref, = torch.autograd.grad(ref.square().sum(), x)
    torch.testing.assert_close(g_out, g_ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("chunk", [3, 512])
def test_ea_inference_exps_unshifted_only_where_the_bound_allows(chunk, monkeypatch):
    """CPU inference exponentiates ea's logits without the shift by their max where |x| * max row norm of Wa proves
    every logit within ``exp_limit`` (then no exp or sum leaves float32's normal range); logits that could exceed it
    take the shifted path. Both give the paper's formula (float64 reference); the large ones would overflow
    unshifted."""
    import zoo.mixers.ea as ea_mod
    torch.manual_seed(3)
    m = _randomise(mixers.build("ea", dim=C, num_heads=H)).eval()
    m.chunk_tokens = chunk
    assert ea_mod.ExternalAttention.exp_limit(1) == 86.0
    assert abs(ea_mod.ExternalAttention.exp_limit(16384) - (88.7 - math.log(16384) - 1)) < 1e-9
    maxes = []
    real = torch.Tensor.amax
    monkeypatch.setattr(torch.Tensor, "amax", lambda t, *a, **k: maxes.append(t.shape) or real(t, *a, **k))
    x = torch.randn(B, N, C)
    wa = m.folded_weights()[0]
    bound = float(x.norm(dim=-1).amax() * wa.norm(dim=1).amax())
    assert bound < m.exp_limit(N)
    with torch.no_grad():
        small = m(x)
    shifted_calls = [s for s in maxes if len(s) == 3 and s[-1] == wa.shape[0]]
    assert shifted_calls == []  # no max over the tokens of a block of logits
    d = copy.deepcopy(m).double()
    torch.testing.assert_close(small.double(), REFS["ea"](d, x.double()), atol=1e-5, rtol=1e-5)
    big = x * (400.0 / bound)  # logits up to 400 > exp_limit: exp(z) over 88.7 overflows float32
    assert float((big @ wa.t()).amax()) > 88.7
    maxes.clear()
    with torch.no_grad():
        out = m(big)
    assert [s for s in maxes if len(s) == 3 and s[-1] == wa.shape[0]]  # the shifted path ran
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), REFS["ea"](d, big.double()), atol=1e-4, rtol=1e-4)


def test_ea_double_normalisation_backward_is_the_derivative():
    """ea's fused softmax-over-tokens + l1-over-slots: its hand-written backward against finite differences
    (``gradcheck``, float64), on two heads of three slots."""
    from zoo.mixers.ea import double_normalise
    torch.manual_seed(0)
    z = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: double_normalise(t, 2), (z,))
    y = double_normalise(z, 2).view(2, 5, 2, 3)
    torch.testing.assert_close(y.sum(dim=-1), torch.ones(2, 5, 2, dtype=torch.float64))  # l1 over slots


def test_ea_training_keeps_one_attention_map_for_backward():
    """With autograd, ea keeps one (B, N, 4h*S) map for the backward pass (the fused double normalisation's output,
    which the projection reuses), not the exp / softmax / l1 chain's several: count the saved tensors of that size."""
    torch.manual_seed(0)
    m = mixers.build("ea", dim=C, num_heads=H).train()
    x = torch.randn(B, N, C, requires_grad=True)
    maps, seen = [], set()

    def pack(t):
        if t.numel() == B * N * 4 * H * m.linear_0.out_features and t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            maps.append(t.shape)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = m(x)
    assert len(maps) == 1, maps
    out.sum().backward()
    assert x.grad is not None and m.trans_dims.weight.grad is not None


@pytest.mark.parametrize("batch", [1, B])  # one image: ea and effa write their blocks straight from the GEMM
@pytest.mark.parametrize("onednn", [True, False], ids=["onednn", "f_linear"])
@pytest.mark.parametrize("name", sorted(REFS))
def test_float32_inference_path_matches_paper_formula(name, onednn, batch, monkeypatch):
    """Under no_grad in float32 the CPU inference path (folded weights; oneDNN's linear where the CPU default or
    ZOO_ONEDNN_LINEAR turns it on) runs; compare both linears with the float64 reference, whatever this CPU's
    default."""
    import zoo.layers.linear as L
    if onednn and L.ONEDNN_OP is None:
        pytest.skip("this torch build has no oneDNN linear")
    monkeypatch.setattr(L, "_ONEDNN_LINEAR", L.ONEDNN_OP if onednn else None)
    torch.manual_seed(3)
    m = mixers.build(name, dim=C, num_heads=H, num_tokens=N).eval()
    if hasattr(m, "chunk_tokens"):
        m.chunk_tokens = 4
    x = torch.randn(batch, N, C)
    with torch.no_grad():
        out = m(x)
        ref = REFS[name](m.double(), x.double())
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
@pytest.mark.parametrize("how", ["autocast", "bf16 weights"])
@pytest.mark.parametrize("batch", [1, B])
@pytest.mark.parametrize("name", sorted(REFS))
def test_bf16_paths_match_paper_formula(name, batch, how, grad):
    """bf16 autocast (the fast path on CPUs with native bf16, and on GPUs) and a model cast to bf16 run every
    mixer's inference and autograd paths, token blocks included (ea's blocked softmax once failed under autocast:
    an ``out=`` product is not autocast), within bf16's rounding of the float64 reference."""
    torch.manual_seed(4)
    m = _randomise(mixers.build(name, dim=C, num_heads=H, num_tokens=N)).train(grad)
    if hasattr(m, "chunk_tokens"):
        m.chunk_tokens = 4
    x = torch.randn(batch, N, C)
    with torch.no_grad():
        ref = REFS[name](copy.deepcopy(m).double(), x.double())
    with torch.set_grad_enabled(grad):
        if how == "autocast":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = m(x)
        else:
            out = m.to(torch.bfloat16)(x.to(torch.bfloat16))
    assert out.dtype in (torch.float32, torch.bfloat16) and out.shape == ref.shape
    err = (out.double() - ref).norm() / ref.norm()
    assert err < 3e-2, f"{name} {how}: relative error {err:.3g}"
    if grad:
        out.float().square().sum().backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters() if p.requires_grad)


@pytest.mark.parametrize("onednn", [True, False], ids=["onednn", "f_linear"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_mlp_inference_in_row_blocks_matches_the_formula(onednn, approximate, monkeypatch):
    """CPU inference runs the channel MLP over blocks of ``CHUNK_ROWS`` rows (the last block shorter); the result is
    fc2(GELU(fc1(x))) in float64. Training, autograd and hooked layers take the one-shot path, and so do inputs
    whose hidden tensor is under ``CHUNK_MIN_BYTES``."""
    import zoo.layers.linear as L
    import zoo.layers.mlp as M
    if onednn and L.ONEDNN_OP is None:
        pytest.skip("this torch build has no oneDNN linear")
    monkeypatch.setattr(L, "_ONEDNN_LINEAR", L.ONEDNN_OP if onednn else None)
    monkeypatch.setattr(M, "CHUNK_ROWS", 64)
    monkeypatch.setattr(M, "CHUNK_MIN_BYTES", 4 * 32 * 150)  # from 150 rows on
    torch.manual_seed(0)
    m = M.Mlp(8, 32).eval()
    m.act.approximate = approximate
    x = torch.randn(2, 100, 8)  # 200 rows: blocks of 64, 64, 64, 8
    with torch.no_grad():
        assert m.chunk_rows(x) == 64 and m.chunk_rows(x[:, :74]) == 0 and m.chunk_rows(x[:, :75]) == 64
        out = m(x)
        d = m.double()
        ref = d.fc2(torch.nn.functional.gelu(d.fc1(x.double()), approximate=approximate))
        m.float()
    assert out.shape == (2, 100, 8)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=0)
    assert m.chunk_rows(x) == 0  # autograd on
    with torch.no_grad():
        m.train()
        assert m.chunk_rows(x) == 0
        m.eval()
        handle = m.fc1.register_forward_hook(lambda *a: None)
        assert m.chunk_rows(x) == 0
        handle.remove()
        assert m.chunk_rows(x.double()) == 0 and m.chunk_rows(x) == 64


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("rows", [0, 64], ids=["one_shot", "blocks"])
def test_mlp_gelu_in_place_at_inference_only(approximate, rows, monkeypatch):
    """Without autograd the GELU overwrites fc1's output (``INPLACE_GELU``): same values as fc2(GELU(fc1(x))) in
    float64, one (rows, hidden) tensor fewer. A hook on fc1 sees its own output unchanged (the plain path runs), and
    so do autograd and training; switching ``INPLACE_GELU`` off gives the same result."""
    import zoo.layers.linear as L
    import zoo.layers.mlp as M
    monkeypatch.setattr(L, "_ONEDNN_LINEAR", None)
    monkeypatch.setattr(M, "CHUNK_ROWS", 64)
    monkeypatch.setattr(M, "CHUNK_MIN_BYTES", 0 if rows else 1 << 40)
    torch.manual_seed(0)
    m = M.Mlp(8, 32).eval()
    m.act.approximate = approximate
    x = torch.randn(2, 100, 8)
    d = copy.deepcopy(m).double()
    ref = d.fc2(torch.nn.functional.gelu(d.fc1(x.double()), approximate=approximate)).detach()
    calls = []
    real = torch.ops.aten.gelu_
    monkeypatch.setattr(torch.ops.aten, "gelu_", lambda h, **k: calls.append(h.shape) or real(h, **k))
    with torch.no_grad():
        assert m.chunk_rows(x) == rows and m.gelu_in_place(x)
        out = m(x)
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=0)
    assert calls == ([(64, 32)] * 3 + [(8, 32)] if rows else [(2, 100, 32)])
    seen = []
    handle = m.fc1.register_forward_hook(lambda mod, inp, o: seen.append(o.clone()) or None)
    with torch.no_grad():
        assert not m.gelu_in_place(x)
        hooked = m(x)
    handle.remove()
    torch.testing.assert_close(seen[0], torch.nn.functional.linear(x, m.fc1.weight, m.fc1.bias))
    torch.testing.assert_close(hooked, out)
    assert not m.gelu_in_place(x)  # autograd on
    monkeypatch.setattr(M, "INPLACE_GELU", False)
    with torch.no_grad():
        assert not m.gelu_in_place(x)
        torch.testing.assert_close(m(x), out)
        m.train()
        assert not m.gelu_in_place(x)
    assert len(calls) == (4 if rows else 1)


def test_onednn_linear_is_on_by_default_only_where_it_measured_faster():
    from zoo.layers.linear import default_enabled
    assert default_enabled("AVX512", env="")[0] is True
    assert default_enabled("AVX2", env="")[0] is False and "slower" in default_enabled("AVX2", env="")[1]
    assert default_enabled("DEFAULT", env="")[0] is False
    assert default_enabled("AVX2", env="1") == (True, "ZOO_ONEDNN_LINEAR=1")
    assert default_enabled("AVX512", env="0") == (False, "ZOO_ONEDNN_LINEAR=0")


def test_token_blocks_are_a_cpu_path(monkeypatch):
    """Token blocks keep a block's map in a CPU's cache; on other devices they would only add kernel launches, so
    ea runs its inference in one block there and effa its direct form (checked on the ``meta`` device, which
    computes shapes only)."""
    import zoo.mixers.ea as ea_mod
    calls = []
    real = ea_mod.linear
    monkeypatch.setattr(ea_mod, "linear", lambda x, *a, **k: calls.append(x.device.type) or real(x, *a, **k))
    m = mixers.build("ea", dim=C, num_heads=H).eval()
    m.chunk_tokens = 2
    with torch.no_grad():
        m(torch.randn(1, N, C))
        assert calls == ["cpu"] * 4  # ceil(7 / 2) blocks of logits on the CPU
        calls.clear()
        assert m.to("meta")(torch.empty(1, N, C, device="meta")).shape == (1, N, C)
        assert calls == ["meta"]  # one block elsewhere
    e = mixers.build("effa", dim=C, num_heads=H).eval()
    e.chunk_tokens = 2
    direct = []
    monkeypatch.setattr(e, "forward_reference", lambda x: direct.append(x.device.type) or x)
    with torch.no_grad():
        e(torch.randn(1, N, C))
        e.to("meta")(torch.empty(1, N, C, device="meta"))
    assert direct == ["meta"]
