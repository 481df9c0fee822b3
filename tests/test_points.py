"""The point tokenizer (zoo.layers.points) and the pcls/pseg models (zoo.heads.points).

Sampling and neighbour searches are checked against brute-force references written here (numpy, Python loops);
invariance to the order of the input points is checked for every mixer, for classification and segmentation.
"""
import itertools
import json

import numpy as np
import pytest
import torch

import zoo
from zoo.layers import points as P

MIXERS = sorted(zoo.list_mixers())


def ref_fps(xyz, m):
    """Farthest point sampling by the definition: start farthest from the centroid, ties -> smallest (x, y, z)."""
    pts = [tuple(p) for p in xyz.tolist()]
    c = np.mean(xyz, axis=0)

    def pick(score):  # the maximum score, ties to the lexicographically smallest point
        best = max(score)
        return pts.index(min(p for p, s in zip(pts, score) if s == best))
    first = pick([sum((a - b) ** 2 for a, b in zip(p, c)) for p in pts])
    chosen, dist = [first], [float("inf")] * len(pts)
    for _ in range(m - 1):
        last = pts[chosen[-1]]
        dist = [min(d, sum((a - b) ** 2 for a, b in zip(p, last))) for d, p in zip(dist, pts)]
        chosen.append(pick(dist))
    return [pts[i] for i in chosen]


def ref_knn(q, ref, k):
    """k nearest neighbours (as points) by a full sort on (squared distance, x, y, z)."""
    out = []
    for a in q.tolist():
        cand = sorted((sum((x - y) ** 2 for x, y in zip(a, b)), tuple(b)) for b in ref.tolist())
        out.append([b for _, b in cand[:k]])
    return out


def grid(n=4):
    """Integer grid points: many exact distance ties, all arithmetic exact in float32."""
    return np.array(list(itertools.product(range(n), repeat=3)), dtype=np.float32)


def test_index_points_matches_loop():
    x = torch.randn(3, 10, 4)
    idx = torch.randint(0, 10, (3, 5, 2))
    out = P.index_points(x, idx)
    for b in range(3):
        for i in range(5):
            for j in range(2):
                assert torch.equal(out[b, i, j], x[b, idx[b, i, j]])


def test_lexsort_orders_rows_like_python_sorted():
    x = torch.tensor(np.random.default_rng(0).integers(0, 3, (2, 20, 3)), dtype=torch.float32)
    order = P.lexsort(x)
    for b in range(2):
        assert P.index_points(x, order)[b].tolist() == sorted(x[b].tolist())


@pytest.mark.parametrize("data", ["random", "grid"])
def test_fps_matches_definition_and_ignores_input_order(data):
    rng = np.random.default_rng(1)
    xyz = rng.normal(size=(40, 3)).astype(np.float32) if data == "random" else grid(3)
    m = 12
    expected = ref_fps(xyz, m)
    for trial in range(3):
        perm = rng.permutation(len(xyz)) if trial else np.arange(len(xyz))
        t = torch.from_numpy(xyz[perm]).unsqueeze(0).repeat(2, 1, 1)
        idx = P.farthest_point_sample(t, m)
        for b in range(2):
            assert [tuple(p) for p in t[b, idx[b]].tolist()] == expected


@pytest.mark.parametrize("data", ["random", "grid"])
def test_knn_matches_brute_force_with_ties_by_coordinates(data):
    rng = np.random.default_rng(2)
    ref = rng.normal(size=(50, 3)).astype(np.float32) if data == "random" else grid(4)
    q = ref[rng.choice(len(ref), 6, replace=False)] + (0 if data == "grid" else 0.01)
    k = 7
    expected = ref_knn(q, ref, k)
    for trial in range(3):
        perm = rng.permutation(len(ref)) if trial else np.arange(len(ref))
        r = torch.from_numpy(ref[perm])[None]
        idx = P.knn(torch.from_numpy(q)[None], r, k)
        got = [[tuple(p) for p in r[0, row].tolist()] for row in idx[0]]
        assert got == expected


def test_morton_order_interleaves_bits():
    # Cells (x, y, z) in a 4x4x4 grid; code bits are x1 y1 z1 x0 y0 z0.
    cells = grid(4)
    perm = np.random.default_rng(3).permutation(len(cells))
    xyz = torch.from_numpy(cells[perm])[None]
    order = P.morton_order(xyz, bits=2)
    codes = []
    for x, y, z in xyz[0, order[0]].long().tolist():
        bits = f"{x:02b}", f"{y:02b}", f"{z:02b}"
        codes.append(int("".join(bits[a][i] for i in range(2) for a in range(3)), 2))
    assert codes == list(range(64))


def test_interpolate_three_nearest_inverse_distance():
    rng = np.random.default_rng(4)
    centres = rng.normal(size=(1, 9, 3)).astype(np.float32)
    feats = rng.normal(size=(1, 9, 5)).astype(np.float32)
    xyz = rng.normal(size=(1, 4, 3)).astype(np.float32)
    out = P.interpolate(torch.from_numpy(xyz), torch.from_numpy(centres), torch.from_numpy(feats))
    for i in range(4):
        d = ((centres[0] - xyz[0, i]) ** 2).sum(1)
        near = np.argsort(d)[:3]
        w = 1 / (d[near] + 1e-8)
        expect = (feats[0, near] * (w / w.sum())[:, None]).sum(0)
        np.testing.assert_allclose(out[0, i].numpy(), expect, rtol=1e-4, atol=1e-5)


def test_sample_group_first_layer_equals_concatenation():
    """PCT applies Linear to cat(f_j - f_i, f_i); the stage computes W1 f_j + Wc f_i, the same map."""
    torch.manual_seed(0)
    sg = P.SampleGroup(4, 6, num_samples=5, k=3)
    f_j, f_i = torch.randn(7, 4), torch.randn(7, 4)
    W1, Wc = sg.proj_neighbour.weight, sg.proj_centre.weight
    W = torch.cat([W1, W1 + Wc], dim=1)  # weight of the concatenated input (f_j - f_i | f_i)
    concat = torch.cat([f_j - f_i, f_i], dim=1) @ W.t()
    torch.testing.assert_close(sg.proj_neighbour(f_j) + sg.proj_centre(f_i), concat)


@pytest.mark.parametrize("mixer", MIXERS)
@pytest.mark.parametrize("task", ["pcls", "pseg"])
def test_output_does_not_depend_on_point_order(mixer, task):
    torch.manual_seed(0)
    n = 128
    model = zoo.load(f"{mixer}_vit_micro", task=task, num_points=n, k=8).eval()
    x = torch.randn(2, n, 3)
    perm = torch.randperm(n)
    cat = torch.tensor([0, 15])
    with torch.no_grad():
        if task == "pcls":
            a, b = model(x), model(x[:, perm])
            assert a.shape == (2, 40)
        else:
            a, b = model(x, cat)[:, perm], model(x[:, perm], cat)
            assert a.shape == (2, n, 50)
    assert (a - b).abs().max().item() < 1e-4


def test_defaults_for_1024_points():
    m = zoo.load("sa_vit_micro", task="pcls")
    assert m.tokenizer.stages == (512, 256) and m.tokenizer.k == 32 and m.num_tokens == 256
    ff = zoo.load("ff_vit_micro", task="pcls")
    assert ff.blocks[0].mixer.num_tokens == 256


def test_normals_segmentation_and_backward():
    torch.manual_seed(0)
    model = zoo.load("ea_vit_micro", task="pseg", num_classes=50, num_categories=16, num_points=64, in_dims=6, k=4)
    x = torch.randn(3, 64, 6)
    out = model(x, torch.tensor([1, 2, 3]))
    assert out.shape == (3, 64, 50) and torch.isfinite(out).all()
    out.square().mean().backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None]
    assert not no_grad


def test_zoo_config_is_json_and_rebuilds():
    model = zoo.load("ff_vit_micro", task="pcls", num_classes=12, num_points=256, k=16)
    cfg = json.loads(json.dumps(model.zoo_config))
    again = zoo.load(cfg["name"], task=cfg["task"], **cfg["args"])
    assert {k: v.shape for k, v in again.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}


def test_bad_inputs_name_the_problem():
    cls = zoo.load("sa_vit_micro", task="pcls", num_points=64, k=4).eval()
    with pytest.raises(ValueError, match=r"6 values per point.*in_dims=3"):
        cls(torch.randn(1, 64, 6))
    with pytest.raises(ValueError, match=r"got 20 points.*samples 32 centres"):
        cls(torch.randn(1, 20, 3))
    seg = zoo.load("sa_vit_micro", task="pseg", num_points=64, k=4).eval()
    with pytest.raises(ValueError, match=r"category ids \[16\] are out of range.*16 categories"):
        seg(torch.randn(2, 64, 3), torch.tensor([0, 16]))
    with pytest.raises(ValueError, match="one id per cloud"):
        seg(torch.randn(2, 64, 3), torch.tensor([0]))
    with pytest.raises(ValueError, match="cannot pick 5 centres from 4 points"):
        P.farthest_point_sample(torch.randn(1, 4, 3), 5)
    with pytest.raises(ValueError, match="k=5 neighbours.*only 4 points"):
        P.knn(torch.randn(1, 2, 3), torch.randn(1, 4, 3), 5)


def test_bench_rows():
    from tasks.points import bench
    rows = bench.run(quick=True, mixers=("ff",), points=(128,))
    assert [(r["task"], r["input"]) for r in rows] == [("pcls", "128 points, batch 8"), ("pseg", "128 points, batch 8")]
    for r in rows:
        assert r["shapes/s"] > 0 and r["grouping ms"] > 0 and r["tokenizer ms"] > 0 and r["tokens"] == 32
