"""``tasks.seg.region_naming``: the segmentor's regions, the fragment view cut from the scene, and the renaming."""
import os
import sys

import numpy as np
import pytest
from PIL import Image

from tasks.seg import errors, oracle, region_naming
from zoo.datasets import FASHION_MNIST_ROOT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _map():
    """A 12x12 label map: class 3 in three blocks (the first two 2 px apart, the third 3 px from the second) and a
    class 5 block touching the first one from below."""
    lab = np.zeros((12, 12), np.int64)
    lab[1:3, 1:3] = 3
    lab[1:3, 5:7] = 3   # columns 3-4 between: a 2-pixel gap
    lab[1:3, 10:12] = 3  # columns 7-9 between: a 3-pixel gap
    lab[3:5, 1:3] = 5
    return lab


def _as_sets(masks):
    return sorted(tuple(map(tuple, np.argwhere(m))) for m in masks)


def test_the_groupings_cut_a_label_map_into_regions():
    lab = _map()
    blocks = [np.zeros_like(lab, bool) for _ in range(4)]
    blocks[0][1:3, 1:3] = blocks[1][1:3, 5:7] = blocks[2][1:3, 10:12] = blocks[3][3:5, 1:3] = True
    assert _as_sets(region_naming.regions(lab, "class components")) == _as_sets(blocks)
    joined = region_naming.regions(lab, "class components, 2-px gaps joined")
    assert _as_sets(joined) == _as_sets([blocks[0] | blocks[1], blocks[2], blocks[3]])  # the gap pixels stay out
    assert _as_sets(region_naming.regions(lab, "item components")) == _as_sets([blocks[0] | blocks[3], blocks[1],
                                                                               blocks[2]])
    # exact items: each item's visible pixels that the segmentor calls an item; an item it misses entirely is left out
    item = oracle.Item(None, 3, blocks[0] | blocks[1], None, None)
    missed = np.zeros_like(lab, bool)
    missed[8:10, 8:10] = True
    regs = region_naming.regions(lab, "exact items", [item, oracle.Item(None, 4, missed, None, None)])
    assert _as_sets(regs) == _as_sets([blocks[0] | blocks[1]])
    with pytest.raises(ValueError, match="needs the scene's replayed items"):
        region_naming.regions(lab, "exact items")
    with pytest.raises(ValueError, match="unknown grouping 'blobs'; choose one of"):
        region_naming.regions(lab, "blobs")


def test_the_fragment_view_does_not_depend_on_the_items_colour():
    """The generator paints an item as intensity / 255 * colour: the brightest channel, stretched to 255 over the
    region, gives the same view for any colour, and it is the oracle's own box of the stretched intensity."""
    rng = np.random.default_rng(0)
    intensity = np.zeros((16, 16), np.float32)
    intensity[3:11, 4:9] = rng.uniform(60, 250, size=(8, 5))
    mask = intensity > 0
    views = []
    for colour in ([255, 120, 130], [110, 200, 140]):
        scene = np.rint(intensity[..., None] / 255 * np.array(colour, np.float32)).astype(np.uint8)
        scene[~mask] = rng.integers(0, 80, size=(int((~mask).sum()), 3))  # a background the view must ignore
        views.append(region_naming.scene_crop(scene, mask).astype(int))
    assert np.abs(views[0] - views[1]).max() <= 3  # the uint8 rounding of a darker colour, nothing more
    expected = oracle._own_box(intensity * (255.0 / intensity.max()), mask).astype(int)
    assert np.abs(views[0] - expected).max() <= 2


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")
def test_renaming_weighs_the_classifier_against_the_segmentors_vote(one_thread):
    import zoo
    clf = zoo.load("sa_vit_micro.cls_fmnist").eval()
    lab = _map()
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, size=(12, 12, 3)).astype(np.uint8)
    regs = region_naming.regions(lab, "class components")
    probs = np.full((11, 12, 12), 0.01, np.float32)
    probs[7] = 0.9  # the segmentor's probabilities favour class 7 everywhere (its labels are another matter)
    out = region_naming.rename([lab], [probs], [image], [regs], clf, alphas=(0.0, 1e6, float("inf")))
    named = oracle.classify(clf, [region_naming.scene_crop(image, m) for m in regs])
    for m, name in zip(regs, named):
        assert (out[0.0][0][m] == name).all()  # alpha 0: the classifier's name for the region's own view
        assert (out[1e6][0][m] == 7).all() and (out[float("inf")][0][m] == 7).all()  # the segmentor's vote
    for a in out:
        assert (out[a][0][lab == 0] == 0).all()  # background stays background
    assert np.array_equal(lab, _map())  # the segmentor's map is not changed in place


@pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")
def test_the_analysis_of_written_scenes(tmp_path, one_thread):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    make_scenes(tmp_path, seed=3, num_train=2, num_val=8, size=64)
    out = region_naming.analyse("sa_vit_micro.seg_scenes", "sa_vit_micro.cls_fmnist", data_root=str(tmp_path),
                                seed=3, alphas=(0.0, 2.0))
    paths, gts = errors.read_split(str(tmp_path), "validation")
    import zoo
    labels, _ = errors.predict(zoo.load("sa_vit_micro.seg_scenes").eval(), paths)
    own = errors.breakdown(errors.confusion(gts, labels, 11), errors.item_votes(gts, labels, 11))
    assert out["segmentor"]["mIoU"] == pytest.approx(own["mIoU"])
    count = {g: out[g]["alpha 0.0"]["regions"] for g in region_naming.GROUPINGS}
    # an item component is a union of class components, and joining gaps only merges them
    assert count["item components"] <= count["class components"]
    assert count["class components, 2-px gaps joined"] <= count["class components"]
    for g in region_naming.GROUPINGS:
        # renaming moves item pixels between item classes only: the item-vs-background IoU is the segmentor's
        assert out[g]["alpha 2.0"]["fg_iou"] == pytest.approx(out["segmentor"]["fg_iou"])
    with pytest.raises(ValueError, match="fragment_epochs > 0"):
        region_naming.analyse("sa_vit_micro.seg_scenes", data_root=str(tmp_path), seed=3)
