"""The cross-entropy of resized logits without the resized logits (``zoo.layers.resize_cross_entropy``) against
``F.cross_entropy(F.interpolate(...))``, and the segmentor's low-memory head losses against mmseg's ``head.loss``."""
import pytest
import torch
import torch.nn.functional as F

import zoo
from zoo.layers.resize_loss import resize_cross_entropy


def _reference(x, labels, align_corners):
    resized = F.interpolate(x, labels.shape[-2:], mode="bilinear", align_corners=align_corners)
    loss = F.cross_entropy(resized, labels, ignore_index=255, reduction="sum")
    correct = ((resized.argmax(1) == labels) & (labels != 255)).sum()
    return loss, correct


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape,size,band", [
    ((2, 11, 8, 8), (32, 32), 1 << 22),   # x4, one band
    ((2, 11, 7, 9), (30, 37), 500),       # non-integer scales, bands of 2 rows
    ((1, 150, 16, 16), (64, 64), 1),      # ADE20K's class count, one row per band
    ((2, 5, 16, 16), (16, 16), 100),      # same size: no resize
])
def test_matches_interpolate_then_cross_entropy(shape, size, band, align_corners):
    torch.manual_seed(0)
    x = (3 * torch.randn(shape)).requires_grad_()
    labels = torch.randint(0, shape[1], (shape[0], *size))
    labels[:, :3, :5] = 255  # unlabelled pixels take no part
    ref, ref_correct = _reference(x, labels, align_corners)
    g_ref, = torch.autograd.grad(ref, x)
    loss, correct = resize_cross_entropy(x, labels, align_corners=align_corners, band_elems=band)
    g, = torch.autograd.grad(loss, x)
    torch.testing.assert_close(loss, ref, rtol=1e-5, atol=0)
    torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-5 * float(g_ref.abs().max()))
    assert int(correct) == int(ref_correct)


def test_by_hand():
    # one row of two source pixels -> 4 output pixels (align_corners=False): class 0 reads 0, 0.25, 0.75, 1 and
    # class 1 reads 0 everywhere; labels 0, 1, 255, 0. CE of (a, 0) with label 0 is log(1 + e^-a), label 1 log(1 + e^a).
    x = torch.tensor([[0.0, 1.0], [0.0, 0.0]]).view(1, 2, 1, 2).requires_grad_()
    labels = torch.tensor([[[0, 1, 255, 0]]])
    loss, correct = resize_cross_entropy(x, labels)
    expected = torch.log1p(torch.exp(torch.tensor(-0.0))) + torch.log1p(torch.exp(torch.tensor(0.25))) \
        + torch.log1p(torch.exp(torch.tensor(-1.0)))
    torch.testing.assert_close(loss, expected)
    # correct: pixel 0 (a tie at 0: argmax takes the first class, its label) and pixel 3; pixel 1 is labelled 1
    # but class 0 leads there (0.25 > 0)
    assert int(correct) == 2


def test_keeps_a_fraction_of_the_memory():
    x = torch.randn(2, 150, 16, 16, requires_grad=True)
    labels = torch.randint(0, 150, (2, 64, 64))
    saved = {}
    for name, fn in (("reference", lambda: _reference(x, labels, False)[0]),
                     ("banded", lambda: resize_cross_entropy(x, labels, band_elems=1 << 16)[0])):
        total = [0]

        def pack(t):
            total[0] += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn().backward()
        saved[name] = total[0]
    full = 2 * 150 * 64 * 64 * 4  # one float32 copy of the resized logits
    assert saved["reference"] >= full and saved["banded"] < 0.3 * full, saved


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match=r"takes \(B, K, h, w\) logits and \(B, H, W\) labels, got \(2, 3, 4\)"):
        resize_cross_entropy(torch.zeros(2, 3, 4), torch.zeros(2, 8, 8, dtype=torch.long))


# -- the segmentor's head losses --------------------------------------------------------------------------------------
def _seg_loss():
    pytest.importorskip("mmseg")
    import zoo.heads.seg  # noqa: F401  (mmcv's compiled-ops stand-in before mmseg's models)
    from zoo.heads import seg_loss
    return seg_loss


def _batch(n=2, size=64, classes=5, seed=0, ignored_rows=4):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, size, size, generator=g)
    samples = []
    for _ in range(n):
        s = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size), pad_shape=(size, size)))
        lab = torch.randint(0, classes, (1, size, size), generator=g)
        lab[:, :ignored_rows] = 255
        s.gt_sem_seg = PixelData(data=lab)
        samples.append(s)
    return x, samples


def _loss_and_grads(model, x, samples, low_memory):
    model.low_memory_loss = low_memory
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # the heads' dropout
    losses = model.loss(x, samples)
    sum(v for k, v in losses.items() if "loss" in k).backward()
    return losses, {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("head", ["uper", "segformer"])
def test_segmentor_losses_match_mmseg(head):
    seg_loss = _seg_loss()
    torch.manual_seed(0)
    model = zoo.load("ea_vit_micro", task="seg", num_classes=5, img_size=64, channels=32, aux_channels=16,
                     decode_head=head).train()
    assert seg_loss.low_memory_applies(model.decode_head) and seg_loss.low_memory_applies(model.auxiliary_head)
    x, samples = _batch()
    ref, g_ref = _loss_and_grads(model, x, samples, low_memory=False)
    got, g = _loss_and_grads(model, x, samples, low_memory=True)
    assert set(got) == set(ref) == {"decode.loss_ce", "decode.acc_seg", "aux.loss_ce", "aux.acc_seg"}
    for k in ref:
        assert got[k].shape == ref[k].shape, k
        torch.testing.assert_close(got[k], ref[k], rtol=1e-5, atol=1e-6, msg=k)
    assert g.keys() == g_ref.keys() and len(g) > 20
    for k in g:
        torch.testing.assert_close(g[k], g_ref[k], rtol=1e-3, atol=1e-6 + 1e-4 * float(g_ref[k].abs().max()), msg=k)


def test_other_losses_run_mmseg():
    seg_loss = _seg_loss()
    from mmseg.models.losses import CrossEntropyLoss
    model = zoo.load("sa_vit_micro", task="seg", num_classes=5, img_size=64, channels=32, aux_channels=16).train()
    head = model.decode_head
    x, samples = _batch()
    feats = model.extract_feat(x)
    head.loss_decode = CrossEntropyLoss(avg_non_ignore=True, loss_weight=0.7)  # still exact: handled
    assert seg_loss.low_memory_applies(head)
    torch.manual_seed(0)
    ref = head.loss(feats, samples, model.train_cfg)
    torch.manual_seed(0)
    got = seg_loss.head_loss(head, feats, samples, model.train_cfg)
    torch.testing.assert_close(got["loss_ce"], ref["loss_ce"], rtol=1e-5, atol=0)
    head.loss_decode = CrossEntropyLoss(class_weight=[1.0, 2.0, 1.0, 1.0, 0.5])  # not handled: mmseg's own loss
    assert not seg_loss.low_memory_applies(head)
    calls = []
    real = type(head).loss
    head.loss = lambda *a, **k: calls.append(1) or real(head, *a, **k)
    _, labelled = _batch(ignored_rows=0)  # (mmseg's class weights index the weight table with 255 otherwise)
    seg_loss.head_loss(head, feats, labelled, model.train_cfg)
    assert calls == [1]
