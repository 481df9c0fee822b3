"""``tasks.seg.oracle``: the replay of the scenes generator, and the oracle predictors against the segmentor's card."""
import os
import sys

import numpy as np
import pytest
from PIL import Image

from tasks.seg import oracle
from zoo.datasets import FASHION_MNIST_ROOT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.skipif(not os.path.isdir(FASHION_MNIST_ROOT), reason="Fashion-MNIST not installed (make data)")


def _written(tmp_path, seed=3, num_val=6):
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    make_scenes(tmp_path, seed=seed, num_train=2, num_val=num_val, size=64)
    return [np.asarray(Image.open(tmp_path / "annotations" / "validation" / f"scene_{n:06d}.png"))
            for n in range(num_val)]


def test_the_replay_gives_the_written_scenes_and_each_items_visible_pixels(tmp_path):
    written = _written(tmp_path)
    maps, scenes = oracle.replay(len(written), seed=3)
    assert all(np.array_equal(m, w) for m, w in zip(maps, written))
    for label, items in zip(written, scenes):
        shown = np.zeros(label.shape, int)
        for it in items:
            assert it.image.shape == it.own.shape == it.box.shape == (28, 28) and 1 <= it.cls <= 10
            assert (label[it.visible] == it.cls).all()  # an item's visible pixels carry its class
            assert it.visible.any() == it.own.any() == it.box.any()
            shown += it.visible
        assert shown.max() <= 1  # no pixel shows two items
        assert np.array_equal(shown > 0, label > 0)  # and every item pixel shows one
    # the other seed's scenes are not these: the analysis refuses them instead of scoring the wrong items
    with pytest.raises(ValueError, match="make scenes"):
        oracle.analyse(data_root=str(tmp_path), seed=4)


def test_a_fragment_is_cut_out_by_its_own_square_box():
    intensity = np.zeros((8, 8), np.float32)
    intensity[1:4, 2:4] = 200  # a 3x2 item, its top row hidden
    visible = intensity > 0
    visible[1] = False
    box = oracle._own_box(intensity, visible, pad=0)
    # the visible 2x2 block fills its own 2x2 box, so the 28x28 view is that block, resized: all 200
    assert box.shape == (28, 28) and (box == 200).all()
    # with a margin of 1 pixel the box is 4x4 with the block in its middle
    box = oracle._own_box(intensity, visible, pad=1)
    assert box[13:15, 13:15].min() == 200 and box[0, 0] == 0 and box[27, 27] == 0
    assert not oracle._own_box(intensity, np.zeros_like(visible)).any()


def test_fragment_training_fits_the_fragments_it_trains_on(one_thread):
    import torch

    import zoo
    model = zoo.load("effa_vit_micro.cls_fmnist").eval()
    view = "visible part in its own box"
    _, scenes = oracle.replay(60, split="training")
    items = [it for s in scenes for it in s if it.visible.any()]
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    before = (oracle.classify(model, [it.box for it in items]) == [it.cls for it in items]).mean()
    tuned = oracle.fragment_trained(model, view, num_scenes=60, epochs=4, lr=1e-3, batch=32)
    after = (oracle.classify(tuned, [it.box for it in items]) == [it.cls for it in items]).mean()
    assert after > before + 0.1, (before, after)
    # it trained a copy: the classifier given is unchanged
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items()) and not model.training


def test_the_oracles_on_the_validation_scenes_against_the_segmentors_card(one_thread):
    from zoo import pretrained
    if not os.path.isdir(os.path.join(ROOT, "data", "fashion_scenes", "annotations", "validation")):
        pytest.skip("the scenes are missing (make scenes)")
    out = oracle.analyse("sa_vit_micro.cls_fmnist", data_root=os.path.join(ROOT, "data", "fashion_scenes"),
                         segmentor="sa_vit_micro.seg_scenes")
    truth, seg = out["true class"], out["segmentor"]
    assert truth["mIoU"] == pytest.approx(100.0) and truth["items_majority_right"] == pytest.approx(100.0)
    assert seg["mIoU"] == pytest.approx(pretrained.read_index()["sa_vit_micro.seg_scenes"].metrics["mIoU"], abs=0.005)
    names_only, finding_only = out["segmentor's names, exact finding"], out["segmentor's finding, true names"]
    assert names_only["fg_iou"] == pytest.approx(100.0)
    assert names_only["items_majority_right"] == pytest.approx(seg["items_majority_right"])
    assert finding_only["fg_iou"] == pytest.approx(seg["fg_iou"]) and finding_only["items_majority_right"] == 100.0
    # each half alone scores above the whole, and the classifier-named finding votes as the classifier does
    assert names_only["mIoU"] > seg["mIoU"] and finding_only["mIoU"] > seg["mIoU"]
    for view in ("visible part in the item's frame", "visible part in its own box"):
        part = out[f"classifier, {view}"]
        named = out[f"segmentor's finding, names of the classifier, {view}"]
        assert named["items_majority_right"] == pytest.approx(part["items_majority_right"])
        # the whole item tells the classifier more than its visible part
        whole = out["classifier, whole item"]
        assert whole["visible_items_top1"] > part["visible_items_top1"] and whole["mIoU"] > part["mIoU"]
    assert not any("fragment-trained" in k for k in out)  # only with fragment_epochs


def test_the_fragment_trained_classifiers_are_kept_as_published_folders(tmp_path, one_thread):
    """``--save-fragment-trained DIR``: each fragment-trained classifier is a folder ``zoo.load`` reads back (a seg
    config can start its trunk from it), scoring what the analysis reported; a folder with files is refused before
    any training."""
    import json

    import torch

    import zoo
    _written(tmp_path / "scenes")
    out_dir = tmp_path / "fragment"
    out = oracle.analyse("ff_vit_micro.cls_fmnist", data_root=str(tmp_path / "scenes"), seed=3, fragment_epochs=1,
                         fragment_scenes=4, save_fragment_trained_to=str(out_dir))
    _, scenes = oracle.replay(6, seed=3)
    items = [it for s in scenes for it in s if it.visible.any()]
    for view, sub in oracle.FRAGMENT_FOLDERS.items():
        model = zoo.load(f"local-dir:{out_dir / sub}").eval()
        named = oracle.classify(model, [oracle.VIEWS[view](it) for it in items])
        top1 = 100 * (named == [it.cls for it in items]).mean()
        reported = out[f"fragment-trained classifier, {view}"]["visible_items_top1"]
        assert top1 == pytest.approx(reported) and model.pretrained_cfg["metrics"] == {"visible_items_top1":
                                                                                        round(reported, 2)}
        cfg = json.loads((out_dir / sub / "config.json").read_text())
        assert cfg["fragment"] == dict(trained_from="ff_vit_micro.cls_fmnist", view=view, seed=3, epochs=1,
                                       num_scenes=4, lr=oracle.FRAGMENT_LR, batch=oracle.FRAGMENT_BATCH)
    # the folder starts a segmentor's trunk as a classifier checkpoint does (init_cfg / backbone_checkpoint)
    seg = zoo.load("ff_vit_micro", task="seg", num_classes=11, img_size=28, patch_size=4, in_chans=1,
                   backbone_checkpoint=str(out_dir / "own_box"))
    tuned = zoo.load(f"local-dir:{out_dir / 'own_box'}").state_dict()
    trunk = seg.backbone.trunk.state_dict()
    assert all(torch.equal(trunk[k], v) for k, v in tuned.items() if k.startswith("blocks."))
    before = (out_dir / "own_box" / "model.safetensors").read_bytes()
    with pytest.raises(FileExistsError, match="not empty; give --save-fragment-trained a new folder"):
        oracle.analyse("ff_vit_micro.cls_fmnist", data_root=str(tmp_path / "scenes"), seed=3, fragment_epochs=1,
                       fragment_scenes=4, save_fragment_trained_to=str(out_dir))
    assert (out_dir / "own_box" / "model.safetensors").read_bytes() == before
    with pytest.raises(ValueError, match="needs fragment_epochs"):
        oracle.analyse(data_root=str(tmp_path / "scenes"), seed=3, save_fragment_trained_to=str(tmp_path / "x"))
