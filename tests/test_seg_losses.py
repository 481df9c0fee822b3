"""``tasks.seg.losses.NeighbourWeightedCrossEntropy``: its pixel weights by hand, its value against mmseg's
``CrossEntropyLoss`` and a hand-weighted mean, and the decode head training with it."""
import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("mmseg")

from tasks.seg.losses import NeighbourWeightedCrossEntropy, near_other_item  # noqa: E402

# background 0, items 1 and 2 side by side, one ignored pixel (255) next to item 2
LABELS = torch.tensor([[[0, 0, 0, 0, 0],
                        [0, 1, 1, 2, 255],
                        [0, 1, 1, 2, 2],
                        [0, 0, 0, 0, 0]]])


def test_near_other_item_by_hand():
    near = near_other_item(LABELS, radius=1)
    # radius 1: the item pixels with a pixel of the other item in their 3x3 window; background, the ignored pixel
    # and item pixels that see only their own class, background or the ignored pixel are not near
    expected = torch.tensor([[[0, 0, 0, 0, 0],
                              [0, 0, 1, 1, 0],
                              [0, 0, 1, 1, 0],
                              [0, 0, 0, 0, 0]]], dtype=torch.bool)
    assert torch.equal(near, expected)
    # radius 2 reaches the item 1 pixels in column 1 and item 2's (2, 4)
    expected2 = torch.tensor([[[0, 0, 0, 0, 0],
                               [0, 1, 1, 1, 0],
                               [0, 1, 1, 1, 1],
                               [0, 0, 0, 0, 0]]], dtype=torch.bool)
    assert torch.equal(near_other_item(LABELS, radius=2), expected2)


def _logits_and_plain_ce(seed):
    """Random (1, 3, 4, 5) logits and mmseg's cross-entropy of them against LABELS (mean over labelled pixels)."""
    from mmseg.models.losses import CrossEntropyLoss
    logits = torch.randn(1, 3, 4, 5, generator=torch.Generator().manual_seed(seed))
    return logits, float(CrossEntropyLoss(avg_non_ignore=True)(logits, LABELS, ignore_index=255))


def test_the_loss_is_a_weighted_mean_and_plain_ce_without_boost():
    logits, plain = _logits_and_plain_ce(0)
    assert NeighbourWeightedCrossEntropy(boost=0)(logits, LABELS) == pytest.approx(plain, rel=1e-6)
    ce = F.cross_entropy(logits, LABELS, ignore_index=255, reduction="none")[0]
    near = [(1, 2), (1, 3), (2, 2), (2, 3)]
    valid = [(i, j) for i in range(4) for j in range(5) if (i, j) != (1, 4)]
    w = {p: 3.0 if p in near else 1.0 for p in valid}  # boost 2
    by_hand = sum(w[p] * float(ce[p]) for p in valid) / sum(w.values())
    assert float(NeighbourWeightedCrossEntropy(boost=2, loss_weight=0.5)(logits, LABELS)) == \
        pytest.approx(0.5 * by_hand, rel=1e-6)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="softmax loss without class weights"):
        NeighbourWeightedCrossEntropy(use_sigmoid=True)
    with pytest.raises(TypeError, match="unknown arguments"):
        NeighbourWeightedCrossEntropy(bost=2)
    with pytest.raises(ValueError, match="radius >= 1"):
        NeighbourWeightedCrossEntropy(radius=0)


def test_a_scenes_segmentor_trains_with_it(tmp_path):
    """The config option of the module docstring builds, the head's loss uses it, and a step lowers it."""
    from mmengine.structures import PixelData
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample

    import tasks.seg  # noqa: F401  (registers the loss)
    import zoo
    from zoo.heads.seg_loss import low_memory_applies
    seg = zoo.load("sa_vit_micro", task="seg", num_classes=3, img_size=32, patch_size=4, channels=16,
                   aux_channels=8)
    # what --cfg-options model.decode_head.loss_decode.type=NeighbourWeightedCrossEntropy leaves: CE's keys + type
    criterion = MODELS.build(dict(type="NeighbourWeightedCrossEntropy", use_sigmoid=False, loss_weight=1.0, boost=2.0))
    calls = []
    criterion.register_forward_hook(lambda module, args, out: calls.append(float(out.detach())))
    seg.decode_head.loss_decode = criterion
    assert not low_memory_applies(seg.decode_head)  # so the head's own loss runs, and with it this one
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 32, 32, generator=g)
    labels = torch.zeros(2, 32, 32, dtype=torch.long)
    labels[:, 8:20, 4:16], labels[:, 8:20, 16:28] = 1, 2
    samples = [SegDataSample(gt_sem_seg=PixelData(data=labels[i:i + 1]), metainfo=dict(img_shape=(32, 32)))
               for i in range(2)]
    opt = torch.optim.AdamW(seg.parameters(), lr=1e-3)
    losses = []
    for _ in range(5):
        loss = seg.loss(x, samples)
        assert "decode.loss_ce" in loss
        total = sum(v for k, v in loss.items() if "loss" in k)
        opt.zero_grad()
        total.backward()
        opt.step()
        losses.append(float(loss["decode.loss_ce"].detach()))
    assert calls == pytest.approx(losses) and losses[-1] < losses[0]


def test_region_sizes_by_hand():
    from tasks.seg.losses import region_sizes
    # LABELS: background is one 4-connected region of 12 pixels, item 1 one of 4, item 2 one of 3, one ignored pixel
    expected = torch.tensor([[[12, 12, 12, 12, 12],
                              [12, 4, 4, 3, 0],
                              [12, 4, 4, 3, 3],
                              [12, 12, 12, 12, 12]]], dtype=torch.float32)
    assert torch.equal(region_sizes(LABELS), expected)
    # pixels of one class that touch only at a corner are separate regions (4-connectivity; 8 would give 2s)
    corner = torch.tensor([[[1, 0], [0, 1]]])
    assert torch.equal(region_sizes(corner), torch.ones(1, 2, 2))


def test_region_balanced_loss_by_hand():
    from tasks.seg.losses import RegionBalancedCrossEntropy
    logits, plain = _logits_and_plain_ce(1)
    assert RegionBalancedCrossEntropy(power=0)(logits, LABELS) == pytest.approx(plain, rel=1e-6)
    ce = F.cross_entropy(logits, LABELS, ignore_index=255, reduction="none")[0]
    background = [(i, j) for i in range(4) for j in range(5) if LABELS[0, i, j] == 0]
    item1, item2 = [(1, 1), (1, 2), (2, 1), (2, 2)], [(1, 3), (2, 3), (2, 4)]
    # power 1: each region's mean cross-entropy, averaged over the three regions
    by_hand = sum(sum(float(ce[p]) for p in r) / len(r) for r in (background, item1, item2)) / 3
    assert float(RegionBalancedCrossEntropy(power=1)(logits, LABELS)) == pytest.approx(by_hand, rel=1e-6)
    with pytest.raises(ValueError, match="power must be >= 0"):
        RegionBalancedCrossEntropy(power=-1)
    with pytest.raises(TypeError, match="unknown arguments"):
        RegionBalancedCrossEntropy(pwr=1)
