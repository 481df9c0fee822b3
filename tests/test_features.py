"""``zoo.load(..., features_only=True)``: the maps of chosen blocks, checked against forward hooks on the blocks of
the unpruned classifier (an independent reading of the same tokens)."""
import pytest
import torch

import zoo
from zoo.features import default_out_indices


def _hooked_block_outputs(model, x):
    outs = {}
    hooks = [blk.register_forward_hook(lambda m, a, y, i=i: outs.__setitem__(i, y)) for i, blk in
             enumerate(model.blocks)]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return outs


@pytest.mark.parametrize("name, size, grid", [("sa_vit_micro", 32, 2), ("ea_vit_micro", 48, 3), ("effa_t2t_7", 64, 4)])
def test_maps_are_the_blocks_tokens_and_the_rest_is_pruned(name, size, grid):
    torch.manual_seed(0)
    full = zoo.load(name, img_size=size, num_classes=7).eval()
    x = torch.randn(2, 3, size, size)
    ref = _hooked_block_outputs(full, x)
    depth = len(full.blocks)
    torch.manual_seed(0)
    feats = zoo.load(name, img_size=size, num_classes=7, features_only=True, out_indices=(1, -1)).eval()
    assert feats.out_indices == (1, depth - 1) and len(feats.trunk.blocks) == depth
    with torch.no_grad():
        maps = feats(x)
    assert len(maps) == 2 and len(feats.feature_info) == 2
    for m, i, ch, red in zip(maps, feats.out_indices, feats.feature_info.channels(), feats.feature_info.reduction()):
        tokens = ref[i][:, full.num_prefix_tokens:]  # (B, h*w, D), row-major over the grid
        assert m.shape == (2, ch, grid, grid) and red == size // grid
        torch.testing.assert_close(m, tokens.transpose(1, 2).reshape(2, ch, grid, grid))
    assert not any(k.startswith("head.") for k in feats.state_dict())
    short = zoo.load(name, img_size=size, num_classes=7, features_only=True, out_indices=(0,))
    assert len(short.trunk.blocks) == 1 and short.feature_info.module_name() == ["blocks.0"]


def test_defaults_pretrained_weights_and_preprocess():
    assert default_out_indices(12) == [2, 5, 8, 11] and default_out_indices(4) == [0, 1, 2, 3]
    feats = zoo.load("ea_vit_micro.cls_fmnist", features_only=True).eval()
    assert feats.out_indices == (0, 1, 2, 3) and feats.pretrained_cfg["tag"] == "ea_vit_micro.cls_fmnist"
    clf = zoo.load("ea_vit_micro.cls_fmnist").eval()
    x = zoo.preprocess(torch.randint(0, 256, (5, 1, 28, 28), dtype=torch.uint8), feats)
    ref = _hooked_block_outputs(clf, x)[3][:, 1:]
    with torch.no_grad():
        torch.testing.assert_close(feats(x)[-1], ref.transpose(1, 2).reshape(5, 64, 7, 7))


def test_bad_requests_say_what_fits():
    with pytest.raises(ValueError, match=r"do not fit a trunk of 4 blocks: use 0..3"):
        zoo.load("sa_vit_micro", img_size=32, features_only=True, out_indices=(4,))
    with pytest.raises(ValueError, match="pass both"):
        zoo.load("sa_vit_micro", out_indices=(1,))
    with pytest.raises(ValueError, match="takes a classifier's trunk"):
        zoo.load("sa_vit_micro", task="seg", num_classes=3, features_only=True)
