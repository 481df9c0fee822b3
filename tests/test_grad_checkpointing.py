"""Gradient checkpointing of the trunk blocks (``set_grad_checkpointing``; the seg backbone's ``with_cp``): the same
gradients as the plain run, dropout and drop path included, with far fewer tensors kept for the backward pass."""
import pytest
import torch

import zoo

MICRO = dict(num_classes=5, img_size=32, in_chans=3, patch_size=4)


def _grads(model, loss_fn, seed=0):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)  # the same dropout and drop-path masks for both runs
    loss = loss_fn(model)
    loss.backward()
    return loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def _same_gradients(model, loss_fn):
    loss, plain = _grads(model, loss_fn)
    model.set_grad_checkpointing(True)
    loss_cp, cp = _grads(model, loss_fn)
    model.set_grad_checkpointing(False)
    assert torch.equal(loss, loss_cp) and plain.keys() == cp.keys() and len(plain) > 10
    for k in plain:  # float rounding only (a kernel may pick another blocking on a first call: ~4e-7 relative seen)
        torch.testing.assert_close(cp[k], plain[k], rtol=1e-4, atol=1e-5 * float(plain[k].abs().max()), msg=k)


def _saved_bytes(model, loss_fn):
    """Bytes autograd keeps for the backward pass outside checkpointed regions (a pack hook sees each one)."""
    total = [0]

    def pack(t):
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn(model).backward()
    return total[0]


@pytest.mark.parametrize("mixer", ["sa", "ea", "effa", "ff"])
def test_classifier_gradients_are_unchanged(mixer):
    torch.manual_seed(0)
    model = zoo.load(f"{mixer}_vit_micro", drop_rate=0.1, drop_path_rate=0.2, **MICRO).train()
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    loss_fn = lambda m: torch.nn.functional.cross_entropy(m(x), y)  # noqa: E731
    _same_gradients(model, loss_fn)
    plain = _saved_bytes(model, loss_fn)
    with_cp = _saved_bytes(model.set_grad_checkpointing(True), loss_fn)
    assert with_cp < 0.25 * plain, (with_cp, plain)
    with torch.no_grad():  # inference does not checkpoint
        model.eval()
        torch.testing.assert_close(model(x), model.set_grad_checkpointing(False)(x), rtol=0, atol=0)


def test_intermediates_and_points_too():
    torch.manual_seed(0)
    model = zoo.load("ea_vit_micro", drop_path_rate=0.2, **MICRO).train()
    x = torch.randn(2, 3, 32, 32)
    _same_gradients(model, lambda m: sum(f.square().mean() for f in m.forward_intermediates(x, [1, 3], norm=True,
                                                                                         intermediates_only=True)))
    pts = zoo.load("ea_vit_micro", task="pcls", num_classes=4, num_points=64, drop_path_rate=0.2).train()
    cloud, y = torch.randn(3, 64, 3), torch.tensor([0, 1, 3])
    _same_gradients(pts, lambda m: torch.nn.functional.cross_entropy(m(cloud), y))


def test_seg_backbone_with_cp():
    pytest.importorskip("mmseg")
    import zoo.heads.seg  # noqa: F401  (registers the backbone; mmcv's compiled-ops stand-in first)
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    with DefaultScope.overwrite_default_scope("mmseg"):
        bb = MODELS.build(dict(type="ZooViTBackbone", name="sa_vit_micro", img_size=32, patch_size=4, with_cp=True))
    assert bb.trunk.grad_checkpointing
    torch.manual_seed(0)
    seg = zoo.load("effa_vit_micro", task="seg", num_classes=3, img_size=32, drop_path_rate=0.2).train()
    x = torch.randn(2, 3, 32, 32)
    _same_gradients(seg, lambda m: m._forward(x).square().mean())  # backbone, neck and decode head
    assert not seg.backbone.trunk.grad_checkpointing
