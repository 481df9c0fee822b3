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
    right, down, rv, dv = affinity.affinity_targets(labels)
    assert right.tolist() == [[[1, 0], [0, 0]]] and down.tolist() == [[[0, 0, 1]]]
    assert rv.tolist() == [[[True, True], [False, False]]] and dv.tolist() == [[[True, False, True]]]
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
    head = affinity.train(frozen, x, y, iters=500, batch=4, lr=5e-3, channels=8, log=log)
    assert all(torch.equal(a, b) for a, b in zip(before, frozen.model.parameters()))  # the segmentor stays frozen
    assert log[-1]["iter"] == 500 and log[-1]["loss"] < 0.3  # it fits the pairs of its 8 scenes
    probs, affs = affinity.predict(frozen, head, x)
    assert probs.shape == (8, 11, 64, 64) and affs.shape == (8, 2, 64, 64)
    right, _, rv, _ = affinity.affinity_targets(y)
    assert float(((affs[:, 0, :, :-1] > 0.5).float() == right)[rv].float().mean()) > 0.9
    own = affinity.score(y.numpy(), probs.argmax(1).numpy())["mIoU"]
    res = affinity.sweep(probs, torch.zeros_like(affs), y.numpy(), betas=(8,), steps=(5, 10))
    assert res == {(8, 5): pytest.approx(own), (8, 10): pytest.approx(own)}  # no affinity, no change
    # the sweep continues the walk from one step count to the next: the same as walking from the start
    res = affinity.sweep(probs, affs, y.numpy(), betas=(8,), steps=(5, 10))
    direct = affinity.walked_labels(probs, affs, 8, 10).numpy()
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
    best = max(rec["tuning"]["mIoU"].values())
    assert rec["tuning"]["mIoU"][f"beta {rec['chosen']['beta']}, {rec['chosen']['steps']} steps"] == best
    assert 0 <= rec["validation"]["affinity_accuracy"] <= 100
    assert json.loads((out / "record.json").read_text())["chosen"] == rec["chosen"]
    head = affinity.AffinityHead(64)
    head.load_state_dict(torch.load(out / "affinity_head.pt"))  # the head is kept
    with pytest.raises(FileExistsError, match="not empty; give a new --out folder"):
        affinity.analyse("sa_vit_micro.seg_scenes", str(out), data_root=root, train_root=root, train_scenes=4,
                         tune_root=root, tune_first=4, tune_scenes=2, iters=4)
