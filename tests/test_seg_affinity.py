"""``tasks.seg.affinity``: affinity targets, the random walk, and the probe on a frozen segmentor."""
import os
import sys

import numpy as np
import pytest
import torch

from tasks.seg import affinity
from zoo.datasets import FASHION_MNIST_ROOT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_affinity_targets_and_loss_by_hand():
    labels = torch.tensor([[[0, 0, 3],
                            [5, 255, 3]]])
    (right, rv), (down, dv) = affinity.affinity_targets(labels)
    assert right.tolist() == [[[1, 0], [0, 0]]] and down.tolist() == [[[0, 0, 1]]]
    assert rv.tolist() == [[[True, True], [False, False]]] and dv.tolist() == [[[True, False, True]]]
    # the two diagonals: (0, 0)-(1, 1) has an unlabelled end; (0, 1)-(1, 0) is 0 against 5; (0, 1)-(1, 2) is 0-3,
    # (0, 2)-(1, 1) unlabelled
    (dr, dvr), (dl, dvl) = affinity.affinity_targets(labels, offsets=((1, 1), (1, -1)))
    assert dr.tolist() == [[[0, 0]]] and dvr.tolist() == [[[False, True]]]
    assert dl.tolist() == [[[0, 0]]] and dvl.tolist() == [[[True, False]]]
    # logits 0 everywhere: every labelled pair costs log 2; pairs with an unlabelled pixel are left out
    logits = torch.zeros(1, 2, 2, 3)
    assert float(affinity.affinity_loss(logits, labels)) == pytest.approx(np.log(2))
    logits[0, 0, 0, 0] = 50.0  # a confident "same" for the first pair, which is right: its cost is ~0
    assert float(affinity.affinity_loss(logits, labels)) == pytest.approx(3 * np.log(2) / 4, abs=1e-6)


def test_one_step_of_the_walk_by_hand():
    probs = torch.tensor([[[[1.0, 0.0, 0.0]], [[0.0, 1.0, 1.0]]]])  # (1, 2, 1, 3): class 0 left, class 1 right
    aff = torch.zeros(1, 2, 1, 3)
    aff[0, 0, 0, 0], aff[0, 0, 0, 1] = 0.5, 1.0  # right-affinities of pairs (0, 1) and (1, 2)
    mask = torch.ones(1, 1, 3, dtype=torch.bool)
    out = affinity.random_walk(probs, aff, mask, beta=1, steps=1)
    # pixel 0: (1 * p0 + 0.5 * p1) / 1.5; pixel 1: (p1 + 0.5 p0 + 1 p2) / 2.5; pixel 2: (p2 + p1) / 2
    expected = torch.tensor([[[[1 / 1.5, 0.5 / 2.5, 0.0]], [[0.5 / 1.5, 2 / 2.5, 1.0]]]])
    assert torch.allclose(out, expected)
    assert torch.equal(probs[0, 0, 0], torch.tensor([1.0, 0.0, 0.0]))  # the input is not changed in place
    # beta sharpens: affinity 0.5 ** 4 between pixels 0 and 1
    out = affinity.random_walk(probs, aff, mask, beta=4, steps=1)
    assert float(out[0, 0, 0, 0]) == pytest.approx(1 / (1 + 0.5 ** 4))


def test_the_walk_over_any_offsets_is_the_dense_transition_matrix_applied_step_by_step():
    g = torch.Generator().manual_seed(1)
    h, w, k = 4, 5, 3
    offsets = affinity.offsets_within(2)
    probs = torch.rand(1, k, h, w, generator=g)
    aff = torch.rand(1, len(offsets), h, w, generator=g)
    mask = torch.rand(1, h, w, generator=g) > 0.3
    # by hand: a symmetric weight matrix over the h*w pixels, 1 on the diagonal, a ** beta between a pixel and its
    # neighbour at each offset when both are in the mask; each step is x <- D^-1 W x on the mask pixels
    beta, n = 2, 3
    wm = torch.eye(h * w, dtype=torch.float64)
    for c, (dy, dx) in enumerate(offsets):
        for y in range(h):
            for x in range(w):
                yy, xx = y + dy, x + dx
                if 0 <= yy < h and 0 <= xx < w and mask[0, y, x] and mask[0, yy, xx]:
                    wm[y * w + x, yy * w + xx] = wm[yy * w + xx, y * w + x] = float(aff[0, c, y, x]) ** beta
    t = wm / wm.sum(1, keepdim=True)
    v = probs[0].reshape(k, -1).double().T
    for _ in range(n):
        v = t @ v
    out = affinity.random_walk(probs, aff, mask, beta, n, offsets)
    assert torch.allclose(out[0].reshape(k, -1).T.double(), v, atol=1e-6)


def test_the_walk_stays_inside_the_mask_and_evens_out_each_region():
    g = torch.Generator().manual_seed(0)
    probs = torch.rand(1, 3, 6, 6, generator=g)
    mask = torch.zeros(1, 6, 6, dtype=torch.bool)
    mask[0, :, :2] = True  # two regions of the mask, apart
    mask[0, :, 4:] = True
    aff = torch.ones(1, 2, 6, 6)
    out = affinity.random_walk(probs, aff, mask, beta=1, steps=2000)
    assert torch.equal(out[..., 2:4], probs[..., 2:4])  # outside the mask: untouched
    for cols in (slice(0, 2), slice(4, 6)):
        region = out[0, :, :, cols].reshape(3, -1)
        assert torch.allclose(region, region[:, :1].expand_as(region), atol=1e-5)  # one value per class and region
    assert not torch.allclose(out[0, :, 0, 0], out[0, :, 0, 5], atol=1e-3)  # the two regions did not mix
    # no affinity: nothing moves
    assert torch.allclose(affinity.random_walk(probs, torch.zeros_like(aff), mask, beta=1, steps=10), probs)


def test_walked_labels_keep_the_background_and_name_items_with_item_classes():
    probs = torch.zeros(1, 3, 1, 5)
    probs[0, :, 0, 0] = torch.tensor([0.9, 0.05, 0.05])  # background
    probs[0, :, 0, 1] = torch.tensor([0.2, 0.7, 0.1])  # item pixels 1-3, one region: 1 and 2 say class 1, 3 class 2
    probs[0, :, 0, 2] = torch.tensor([0.3, 0.4, 0.3])
    probs[0, :, 0, 3] = torch.tensor([0.3, 0.1, 0.6])
    probs[0, :, 0, 4] = torch.tensor([0.6, 0.1, 0.3])  # background again
    aff = torch.ones(1, 2, 1, 5)
    labels = affinity.walked_labels(probs, aff, beta=1, steps=200)
    # The walk converges to the mean weighted by each pixel's 1 + neighbour weights (2, 3, 2): class 1 has
    # 2 * 0.7 + 3 * 0.4 + 2 * 0.1 = 2.8 against class 2's 2.3, so the whole region is class 1.
    assert labels[0, 0].tolist() == [0, 1, 1, 1, 0]
    assert affinity.walked_labels(probs, torch.zeros_like(aff), beta=1, steps=200)[0, 0].tolist() == [0, 1, 1, 2, 0]


def test_affinity_regions_join_confident_pairs_inside_the_mask_and_vote():
    probs = torch.zeros(2, 3, 1, 6)
    probs[:, 0] = 0.9  # background unless set below
    #          pixel:     1                2                3                4
    for x, p in zip((1, 2, 3, 4), ([0.1, 0.8, 0.1], [0.1, 0.3, 0.6], [0.1, 0.45, 0.45], [0.1, 0.3, 0.6])):
        probs[:, :, 0, x] = torch.tensor(p)
    aff = torch.zeros(2, 2, 1, 6)
    aff[:, 0, 0, 1] = 0.99  # pixels 1-2 join
    aff[:, 0, 0, 2] = 0.6  # 2-3: joined at threshold 0.5, not at 0.9
    aff[:, 0, 0, 3] = 0.95  # 3-4 join
    aff[:, 0, 0, 4] = 1.0  # 4-5: pixel 5 is background, so no join
    mask = probs.argmax(1) != 0
    regions = affinity.affinity_regions(aff, mask, 0.9)
    r = regions[0, 0].tolist()
    assert r[0] == r[5] == -1 and r[1] == r[2] and r[3] == r[4] and r[1] != r[3]
    assert set(regions[1, 0, 1:5].tolist()).isdisjoint(r)  # ids are unique across the batch
    # region {1, 2}: class 1 has 0.8 + 0.3 = 1.1 against class 2's 0.7; region {3, 4}: 0.75 against 1.05
    assert affinity.region_labels(probs, aff, 0.9)[0, 0].tolist() == [0, 1, 1, 2, 2, 0]
    # one region {1..4} at 0.5: class 1 has 1.85, class 2 1.75
    assert affinity.region_labels(probs, aff, 0.5)[0, 0].tolist() == [0, 1, 1, 1, 1, 0]


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")
def test_the_probe_trains_a_head_and_the_sweep_scores_the_segmentor_without_affinity(tmp_path, one_thread):
    import zoo
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    make_scenes(tmp_path, seed=3, num_train=8, num_val=4, size=64)
    seg = zoo.load("sa_vit_micro.seg_scenes")
    frozen = affinity._Frozen(seg)
    x, y = affinity._load(str(tmp_path), "training", seg)
    before = [p.clone() for p in frozen.model.parameters()]
    log = []
    offsets = affinity.offsets_within(1.5)  # right, down and the two diagonals
    head = affinity.train(frozen, x, y, iters=500, batch=4, lr=5e-3, channels=8, log=log, offsets=offsets)
    assert all(torch.equal(a, b) for a, b in zip(before, frozen.model.parameters()))  # the segmentor stays frozen
    assert log[-1]["iter"] == 500 and log[-1]["loss"] < 0.3  # it fits the pairs of its 8 scenes
    probs, affs = affinity.predict(frozen, head, x)
    assert probs.shape == (8, 11, 64, 64) and affs.shape == (8, 4, 64, 64)
    for c, (same, valid) in enumerate(affinity.affinity_targets(y, offsets=offsets)):
        hit = (affinity.pair_views(affs[:, c], offsets[c])[0] > 0.5).float() == same
        assert float(hit[valid].float().mean()) > 0.9
    own = affinity.score(y.numpy(), probs.argmax(1).numpy())["mIoU"]
    res = affinity.sweep(probs, torch.zeros_like(affs), y.numpy(), betas=(8,), steps=(5, 10), offsets=offsets)
    assert res == {(8, 5): pytest.approx(own), (8, 10): pytest.approx(own)}  # no affinity, no change
    # the sweep continues the walk from one step count to the next: the same as walking from the start
    res = affinity.sweep(probs, affs, y.numpy(), betas=(8,), steps=(5, 10), offsets=offsets)
    direct = affinity.walked_labels(probs, affs, 8, 10, offsets=offsets).numpy()
    assert res[(8, 10)] == pytest.approx(affinity.score(y.numpy(), direct)["mIoU"])


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")
def test_the_analysis_end_to_end_on_written_scenes(tmp_path, one_thread):
    import json
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    make_scenes(tmp_path / "scenes", seed=3, num_train=6, num_val=3, size=64)
    root, out = str(tmp_path / "scenes"), tmp_path / "out"
    rec = affinity.analyse("sa_vit_micro.seg_scenes", str(out), data_root=root, train_root=root, train_scenes=4,
                           tune_root=root, tune_first=4, tune_scenes=2, iters=4, betas=(8, 16), steps=(2, 4))
    assert (rec["chosen"]["beta"], rec["chosen"]["steps"]) in {(8, 2), (8, 4), (16, 2), (16, 4)}
    regions = rec["tuning"]["regions_mIoU"]  # NaN where 2 scenes lack a class altogether
    assert regions[f"threshold {rec['chosen']['threshold']}"] == pytest.approx(max(regions.values()), nan_ok=True)
    best = max(rec["tuning"]["mIoU"].values())
    assert rec["tuning"]["mIoU"][f"beta {rec['chosen']['beta']}, {rec['chosen']['steps']} steps"] == best
    assert 0 <= rec["validation"]["affinity_accuracy"] <= 100
    assert json.loads((out / "record.json").read_text())["chosen"] == rec["chosen"]
    head = affinity.AffinityHead(64)
    head.load_state_dict(torch.load(out / "affinity_head.pt"))  # the head is kept
    # a kept head is scored again without training: the same affinities, so the same accuracy
    again = affinity.analyse("sa_vit_micro.seg_scenes", str(tmp_path / "again"), data_root=root, train_root=root,
                             train_scenes=4, tune_root=root, tune_first=4, tune_scenes=2, iters=4, betas=(8, 16),
                             steps=(2, 4), head_path=str(out / "affinity_head.pt"))
    assert again["curve"] == [] and again["head"] == str(out / "affinity_head.pt")
    assert again["validation"]["affinity_accuracy"] == rec["validation"]["affinity_accuracy"]
    assert again["tuning"]["mIoU"] == rec["tuning"]["mIoU"]
    with pytest.raises(ValueError, match="predicts 2 neighbours, radius 2 has 6; give the --radius"):
        affinity.analyse("sa_vit_micro.seg_scenes", str(tmp_path / "wrong"), data_root=root, train_root=root,
                         train_scenes=4, tune_root=root, tune_first=4, tune_scenes=2, iters=4,
                         head_path=str(out / "affinity_head.pt"), radius=2)
    # the segmentor with the head and the chosen walk, as a published folder: its predictions are the walk's labels
    import zoo
    refined_dir = tmp_path / "refined"
    third = affinity.analyse("sa_vit_micro.seg_scenes", str(tmp_path / "third"), data_root=root, train_root=root,
                             train_scenes=4, tune_root=root, tune_first=4, tune_scenes=2, iters=4, betas=(8, 16),
                             steps=(2, 4), head_path=str(out / "affinity_head.pt"), refined_dir=str(refined_dir))
    cfg = json.loads((refined_dir / "config.json").read_text())
    assert cfg["pretrained_tag"] == "sa_vit_micro.seg_scenes" and cfg["metrics"] is None  # tools/test.py scores it
    assert cfg["training"]["refine"]["chosen"] == third["chosen"] and cfg["training"]["iter"] == 24000
    model = zoo.load(f"local-dir:{refined_dir}").eval()
    assert (model.refine["beta"], model.refine["steps"]) == (third["chosen"]["beta"], third["chosen"]["steps"])
    x, _ = affinity._load(root, "validation", model)
    frozen = affinity._Frozen(zoo.load(f"local-dir:{refined_dir}"))  # the float16-stored weights, refine off
    probs, affs = affinity.predict(frozen, model.affinity_head, x)
    expected = affinity.walked_labels(probs, affs, model.refine["beta"], model.refine["steps"], tol=1e-5)
    assert torch.equal(torch.stack([s.pred_sem_seg.data[0] for s in model.predict(x)]), expected)
    with pytest.raises(FileExistsError, match="not empty; give a new folder"):
        affinity.analyse("sa_vit_micro.seg_scenes", str(out), data_root=root, train_root=root, train_scenes=4,
                         tune_root=root, tune_first=4, tune_scenes=2, iters=4)


def test_chebyshev_coefficients_of_a_power_by_hand():
    from zoo.layers.affinity import chebyshev_power
    assert chebyshev_power(2, 0.0) == pytest.approx([0.5, 0.0, 0.5])  # x^2 = (T_0 + T_2) / 2
    assert chebyshev_power(3, 0.0) == pytest.approx([0.0, 0.75, 0.0, 0.25])  # x^3 = (3 T_1 + T_3) / 4
    xs = np.linspace(-1, 1, 101)
    for t, tol in ((800, 1e-4), (101, 1e-6)):
        c = chebyshev_power(t, tol)
        assert sum(c) == pytest.approx(1.0, abs=tol) and 1.0 - sum(c) <= tol
        assert len(c) - 1 <= (2 * t * np.log(2 / tol)) ** 0.5  # the binomial tail bound 2 exp(-m^2 / 2t) <= tol
        series = np.polynomial.chebyshev.chebval(xs, c)
        assert np.abs(series - xs ** t).max() <= tol  # uniformly on [-1, 1], as the dropped coefficients bound it


@pytest.mark.parametrize("radius", [1, 1.5])
def test_the_chebyshev_walk_is_the_step_by_step_walk_within_its_tolerance(radius):
    g = torch.Generator().manual_seed(2)
    offsets = affinity.offsets_within(radius)
    probs = torch.rand(3, 4, 24, 20, generator=g).softmax(1)
    aff = torch.rand(3, len(offsets), 24, 20, generator=g) ** 0.05  # mostly close to 1: slow mixing, long walks
    mask = torch.rand(3, 24, 20, generator=g) > 0.2
    for steps in (300, 800):
        slow = affinity.random_walk(probs, aff, mask, 16, steps, offsets)
        fast = affinity.random_walk(probs, aff, mask, 16, steps, offsets, tol=1e-6)
        assert float((fast - slow).abs().max()) < 1e-5
        assert torch.equal(fast[..., ~mask[0]][0], probs[..., ~mask[0]][0])  # outside the mask: untouched
    # few steps: the series would need every term, so the steps are taken one by one (the same numbers)
    assert torch.equal(affinity.random_walk(probs, aff, mask, 16, 3, offsets, tol=1e-6),
                       affinity.random_walk(probs, aff, mask, 16, 3, offsets))


def _refined_segmentor(name="sa_vit_micro", **refine):
    import zoo
    torch.manual_seed(0)
    model = zoo.load(name, task="seg", num_classes=5, img_size=32, patch_size=4, channels=16,
                     aux_channels=0, refine=dict(channels=8, steps=40, beta=4, **refine))
    for m in model.modules():  # random running statistics, so that the heads' outputs are not all alike
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.normal_()
            m.running_var.uniform_(0.5, 2)
    return model.eval()


@pytest.mark.parametrize("name", ["sa_vit_micro", "ff_vit_micro"])  # ff: sliding-window inference at its crop
def test_a_refined_segmentor_predicts_the_walk_of_its_own_probabilities_along_its_affinity_head(name):
    model = _refined_segmentor(name)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        refined = model(x)  # mode="tensor": the refined probabilities
        model.use_refine = False
        logits = model(x)
        model.use_refine = True
        samples = model.predict(x)
    # the same thing from the library's functions: softmax at the input size, affinities from the head's features
    feats = []
    hook = model.decode_head.conv_seg.register_forward_hook(lambda mod, args, out: feats.append(args[0]))
    with torch.no_grad():
        model.use_refine = False
        model(x)
        hook.remove()
        aff = model.affinity_head(x, feats[0]).sigmoid()
        model.use_refine = True
    probs = logits.softmax(1)
    expected = affinity.walked_labels(probs, aff, beta=4, steps=40, offsets=model.affinity_head.offsets, tol=1e-5)
    assert torch.equal(refined.argmax(1), expected)
    assert torch.equal(torch.stack([s.pred_sem_seg.data[0] for s in samples]), expected)
    assert (expected != probs.argmax(1)).any()  # the walk moved some labels
    background = probs.argmax(1) == 0
    assert torch.equal(refined.permute(0, 2, 3, 1)[background], probs.permute(0, 2, 3, 1)[background])
    assert torch.allclose(refined.sum(1), torch.ones(2, 32, 32), atol=1e-5)  # probabilities
    # background=None: every pixel walks, and the labels are the walk's argmax over all classes
    model.refine["background"] = None
    with torch.no_grad():
        everywhere = model(x)
    walked = affinity.random_walk(probs, aff, torch.ones(2, 32, 32, dtype=torch.bool), 4, 40,
                                  model.affinity_head.offsets, tol=1e-5)
    assert torch.allclose(everywhere, walked, atol=1e-6)


def test_a_refined_segmentor_is_saved_and_loaded_with_its_head_and_setting(tmp_path):
    import zoo
    model = _refined_segmentor(radius=1.5)
    model.refine["beta"] = 8  # e.g. the setting a tuning chose after training
    zoo.save_pretrained(model, tmp_path)
    again = zoo.load(f"local-dir:{tmp_path}")
    assert again.refine == {**model.refine} and again.refine["beta"] == 8
    assert len(again.affinity_head.offsets) == 4
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(again.eval()(x), model(x))
    with pytest.raises(ValueError, match=r"refine takes \['background', 'beta', .*got unknown \['walk'\]"):
        _refined_segmentor(walk=3)
    plain = zoo.load("sa_vit_micro", task="seg", num_classes=5, img_size=32, patch_size=4)
    with pytest.raises(ValueError, match="no refine head; build it with refine=dict"):
        plain.refined_probs(x)


def test_the_radius_of_a_head_is_read_back_from_its_offsets():
    for radius in (1, 1.5, 2, 3):
        assert affinity.offsets_within(affinity._radius_of(affinity.offsets_within(radius))) == \
            affinity.offsets_within(radius)
    assert affinity._radius_of(affinity.NEIGHBOURS) == 1 and isinstance(affinity._radius_of(affinity.NEIGHBOURS), int)
    with pytest.raises(ValueError, match="not the neighbours within any radius"):
        affinity._radius_of(((0, 1), (1, 1)))  # a diagonal without the lower neighbour


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")
def test_an_interrupted_head_training_resumes_to_the_same_head_bit_for_bit(tmp_path, one_thread, monkeypatch):
    import functools

    import zoo
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    make_scenes(tmp_path / "scenes", seed=3, num_train=8, num_val=2, size=64)
    root = str(tmp_path / "scenes")
    frozen = affinity._Frozen(zoo.load("sa_vit_micro.seg_scenes"))
    x, y = affinity._load(root, "training", frozen.model)
    kw = dict(iters=6, batch=4, lr=5e-3, channels=8)
    whole = affinity.train(frozen, x, y, **kw).state_dict()

    def same(head):
        return head.keys() == whole.keys() and all(torch.equal(head[k], whole[k]) for k in whole)

    state = str(tmp_path / "train_state.pt")
    real, calls = affinity.affinity_loss, []

    def stop_at(step):
        def loss(*args, **kwargs):
            calls.append(1)
            if len(calls) == step:
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        calls.clear()
        return loss

    monkeypatch.setattr(affinity, "affinity_loss", stop_at(5))
    with pytest.raises(KeyboardInterrupt):
        affinity.train(frozen, x, y, state_path=state, save_every=2, **kw)
    assert torch.load(state, weights_only=True)["step"] == 4  # the last state before the stop
    with pytest.raises(ValueError, match="differs in lr"):
        affinity.train(frozen, x, y, state_path=state, save_every=2, **{**kw, "lr": 1e-3})
    torch.set_num_threads(2)
    try:
        with pytest.raises(ValueError, match="differs in threads"):
            affinity.train(frozen, x, y, state_path=state, save_every=2, **kw)
    finally:
        torch.set_num_threads(1)
    with pytest.raises(ValueError, match="differs in labels"):
        affinity.train(frozen, x, y.flip(-1), state_path=state, save_every=2, **kw)
    monkeypatch.setattr(affinity, "affinity_loss", stop_at(0))  # counts the steps, never stops
    assert same(affinity.train(frozen, x, y, state_path=state, save_every=2, **kw).state_dict()) and len(calls) == 2
    assert torch.load(state, weights_only=True)["step"] == 6  # the finished training's state: no step left
    calls.clear()
    assert same(affinity.train(frozen, x, y, state_path=state, save_every=2, **kw).state_dict()) and not calls

    # through analyse (its head trains with the iters, batch, lr and channels above): stopped while the head trains,
    # the folder is refused without resume (with the hint) and finished with it, to the head of an unbroken analyse;
    # stopped while it scores, it is finished without training again
    ana = dict(data_root=root, train_root=root, train_scenes=8, tune_root=root, tune_first=4, tune_scenes=2, iters=6,
               betas=(8,), steps=(2,))
    monkeypatch.setattr(affinity, "train", functools.partial(affinity.train, batch=4, lr=5e-3, channels=8,
                                                             save_every=2))
    monkeypatch.setattr(affinity, "affinity_loss", stop_at(5))
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        affinity.analyse("sa_vit_micro.seg_scenes", str(out), **ana)
    assert os.listdir(out) == [affinity.STATE_FILE] and affinity.resumable(str(out))
    with pytest.raises(FileExistsError, match="or resume=True"):
        affinity.analyse("sa_vit_micro.seg_scenes", str(out), **ana)
    monkeypatch.setattr(affinity, "affinity_loss", stop_at(0))
    rec = affinity.analyse("sa_vit_micro.seg_scenes", str(out), resume=True, **ana)
    assert len(calls) == 2 and sorted(os.listdir(out)) == ["affinity_head.pt", "record.json"]
    assert same(torch.load(out / "affinity_head.pt", weights_only=True))

    out2, real_sweep = tmp_path / "out2", affinity.sweep

    def stopped_sweep(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(affinity, "sweep", stopped_sweep)
    with pytest.raises(KeyboardInterrupt):
        affinity.analyse("sa_vit_micro.seg_scenes", str(out2), **ana)
    assert sorted(os.listdir(out2)) == ["affinity_head.pt", affinity.STATE_FILE]
    monkeypatch.setattr(affinity, "sweep", real_sweep)
    calls.clear()
    again = affinity.analyse("sa_vit_micro.seg_scenes", str(out2), resume=True, **ana)
    import json
    assert not calls and again["chosen"] == rec["chosen"]
    assert json.dumps(again["validation"], sort_keys=True) == json.dumps(rec["validation"], sort_keys=True)  # NaNs
