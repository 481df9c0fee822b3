import json

from zoo.cli import main


def test_list_and_info(capsys):
    assert main(["list", "ff_*"]) == 0
    assert capsys.readouterr().out.split() == ["ff_t2t_7", "ff_vit_base", "ff_vit_micro", "ff_vit_mini", "ff_vit_small",
                                                  "ff_vit_tiny"]
    assert main(["info", "ea_vit_micro", "--args", '{"img_size": 32, "num_classes": 10}']) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["mixer"] == "ea" and info["embed_dim"] == 64 and info["params"] > 0


def test_info_of_a_tag_shows_its_entry_and_the_architecture_its_weights_need(capsys):
    import zoo
    assert main(["info", "ea_vit_micro.cls_fmnist"]) == 0
    info = json.loads(capsys.readouterr().out)
    entry = zoo.registry.pretrained_cfg("ea_vit_micro.cls_fmnist")
    assert info["pretrained_cfg"] == entry.to_dict() and info["task"] == "cls"
    assert info["params"] == entry.num_params  # built with the entry's args (28 px, 1 channel, 10 classes)
    assert main(["info", "ea_vit_micro.cls_fmnst"]) == 2
    assert "ea_vit_micro.cls_fmnist" in capsys.readouterr().err
    assert main(["info", "ea_vit_micro.cls_fmnist", "--task", "seg"]) == 2
    assert "holds cls weights, not seg; drop --task" in capsys.readouterr().err


def test_unknown_name_is_an_error_with_matches(capsys):
    assert main(["info", "ea_vit_tny"]) == 2
    assert "ea_vit_tiny" in capsys.readouterr().err


def test_predict_prints_classes_and_writes_label_maps_without_overwriting(tmp_path, capsys):
    import numpy as np
    import pytest
    import torch
    from PIL import Image

    import zoo
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 256, size=(28, 28), dtype=np.uint8)
    Image.fromarray(grey).save(tmp_path / "item.png")
    assert main(["predict", "ea_vit_micro.cls_fmnist", str(tmp_path / "item.png"), "--top", "3"]) == 0
    printed = capsys.readouterr().out.split(": ", 1)[1].strip().split(", ")
    clf = zoo.load("ea_vit_micro.cls_fmnist").eval()
    cfg = clf.pretrained_cfg
    x = (torch.from_numpy(grey).float()[None, None] / 255 - cfg["mean"][0]) / cfg["std"][0]  # by hand
    with torch.no_grad():
        p = clf(x).softmax(-1)[0]
    top = p.topk(3)
    assert printed == [f"{cfg['label_names'][k]} {100 * float(v):.1f}%" for v, k in zip(top.values, top.indices.tolist())]

    scene = rng.integers(0, 256, size=(64, 64, 3), dtype=np.uint8)
    Image.fromarray(scene).save(tmp_path / "scene.png")
    out = tmp_path / "labels"
    assert main(["predict", "ea_vit_micro.seg_scenes", str(tmp_path / "scene.png"), "--out", str(out)]) == 0
    assert "scene.png ->" in capsys.readouterr().out
    seg = zoo.load("ea_vit_micro.seg_scenes").eval()
    m, s = torch.tensor(seg.pretrained_cfg["mean"]).view(1, 3, 1, 1), torch.tensor(seg.pretrained_cfg["std"]).view(1, 3, 1, 1)
    with torch.no_grad():
        expected = seg((torch.from_numpy(scene).permute(2, 0, 1)[None].float() / 255 - m) / s).argmax(1)[0]
    assert np.array_equal(np.array(Image.open(out / "scene.png")), expected.numpy())
    before = (out / "scene.png").read_bytes()
    assert main(["predict", "ea_vit_micro.seg_scenes", str(tmp_path / "scene.png"), "--out", str(out)]) == 2
    assert "would overwrite" in capsys.readouterr().err and (out / "scene.png").read_bytes() == before
    assert main(["predict", "ea_vit_micro.seg_scenes", str(tmp_path / "scene.png")]) == 2
    assert "--out" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["predict", "ea_vit_micro.cls_fmnist"])  # no image: argparse's usage error


def test_predict_refuses_missing_or_unreadable_images_before_writing_anything(tmp_path, capsys):
    import numpy as np
    from PIL import Image

    good = tmp_path / "scene.png"
    Image.fromarray(np.zeros((64, 64, 3), dtype=np.uint8)).save(good)
    out = tmp_path / "labels"
    assert main(["predict", "ea_vit_micro.seg_scenes", str(good), str(tmp_path / "gone.png"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no such image file" in err and "gone.png" in err and "scene.png" not in err
    (tmp_path / "notes.png").write_text("not an image")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(good.read_bytes()[:60])
    assert main(["predict", "ea_vit_micro.seg_scenes", str(good), str(tmp_path / "notes.png"), str(truncated),
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not an image PIL can read" in err and "notes.png" in err and "cut.png" in err
    assert not out.exists()  # the good image's label map was not written either
