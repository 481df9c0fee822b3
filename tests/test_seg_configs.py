"""Every config in configs/seg builds its real model and runs one training (loss) step and one predict step.

The full-size models (tiny/small/base at 512x512 with 512-channel UPerHeads or the 128-channel light SegformerHead)
are built as configured, but the steps run on a shrunk copy so the file stays fast on a CPU. What is shrunk, via the
same keys a user passes to ``--cfg-options``: ``model.backbone.name`` -> the config's mixer at size ``micro``;
``model.backbone.img_size`` and ``model.data_preprocessor.size`` -> 64x64 (and the slide window of ``ff`` configs ->
64/42); decode head channels -> 32 and FCN channels 256 -> 16 (UPerNet configs; the light ones have no auxiliary
head). Everything else (neck, pool scales, losses, optimiser, schedule) is the config's own.
"""
import copy
import glob
import os
import re

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(glob.glob(os.path.join(ROOT, "configs", "seg", "*.py")))
NAME = re.compile(r"(?P<head>upernet|segformerhead)_(?P<mixer>[a-z]+)-vit-(?P<size>[a-z]+)(?:-p(?P<patch>\d+))?_"
                  r"(?P<gpus>\d+)xb"
                  r"(?P<batch>\d+)-(?P<iters>\w+)_"
                  r"(?P<data>[a-z0-9-]+)-(?P<h>\d+)x(?P<w>\d+)(?:-(?P<variant>[a-z][a-z0-9-]*))?\.py$")


def _cfg(path):
    from mmengine.config import Config
    return Config.fromfile(path)


def _build(model_cfg):
    import tasks.seg  # noqa: F401  (what custom_imports loads)
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    with DefaultScope.overwrite_default_scope("mmseg"):
        return MODELS.build(model_cfg)


def _batch(num_classes, size=64, n=2):
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    g = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for _ in range(n):
        inputs.append(torch.randint(0, 256, (3, size, size), dtype=torch.uint8, generator=g))
        s = SegDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size), pad_shape=(size, size)))
        s.gt_sem_seg = PixelData(data=torch.randint(0, num_classes, (1, size, size), generator=g))
        samples.append(s)
    return dict(inputs=inputs, data_samples=samples)


def test_the_config_set():
    names = [os.path.basename(p) for p in CONFIGS]
    heads = ("upernet", "segformerhead")
    ade = {f"{h}_{m}-vit-{s}_8xb2-160k_ade20k-512x512.py" for h in heads for m in ("sa", "ea", "effa", "ff")
           for s in ("tiny", "small", "base")}
    assert ade <= set(names) and len(ade) == 24
    # Both heads from scratch at the short schedule (the heads' comparison), the first published recipe (2,000
    # iterations), the ones published next (three, then six times as long at lr 4e-3; then with the head at strides
    # 4-32 and no random rescaling) and the bundled one (the same with a random whole-pixel shift).
    assert {n for n in names if "fashion-scenes" in n} == {
        f"{h}_{m}-vit-micro_1xb16-1500_fashion-scenes-64x64.py" for h in heads for m in ("sa", "ea", "effa", "ff")
    } | {f"upernet_{m}-vit-micro-p4_1xb16-{n}_fashion-scenes-64x64.py" for m in ("sa", "ea", "effa", "ff")
         for n in (2000, 6000, 12000)} | {
        f"upernet_{m}-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-{v}.py"
        for m in ("sa", "ea", "effa", "ff") for v in ("norescale", "shift8")} | {
        f"upernet_{m}-vit-micro-p4_1xb16-{n}_fashion-scenes{k}-64x64-head4to32-shift8.py"
        for m in ("sa", "ea", "effa", "ff") for n, k in ((24000, "40k"), (48000, "80k"))} | {
        # probes of the auxiliary loss on the last block's own token grid (docs/seg_scenes_study.md)
        f"upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8-{v}.py" for v in ("auxs4",
                                                                                                      "auxs4w1")} | {
        # probes of a loss that weighs every region alike (tasks/seg/losses.py)
        f"upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8-{v}.py" for v in ("rb1", "rb05")}


@pytest.mark.parametrize("iters, scenes", [(24000, "40k"), (48000, "80k")])
def test_the_bigger_scenes_recipes_are_the_bundled_one_on_more_scenes_for_more_iterations(iters, scenes):
    """The 40,000- and 80,000-scene configs change the shift8 recipe in the training scenes' folder and the schedule's
    length only (24,000 and 48,000 iterations, the poly decay to 0 at the end); validation reads the scenes of `make
    scenes`, whose validation split is the same."""
    for m in ("sa", "ea", "effa", "ff"):
        base = _cfg(os.path.join(ROOT, f"configs/seg/upernet_{m}-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-"
                                       f"head4to32-shift8.py"))
        big = _cfg(os.path.join(ROOT, f"configs/seg/upernet_{m}-vit-micro-p4_1xb16-{iters}_fashion-scenes{scenes}-"
                                      f"64x64-head4to32-shift8.py"))
        assert big.train_dataloader.dataset.data_root == f"data/fashion_scenes{scenes}"
        assert big.val_dataloader.dataset.data_root == base.val_dataloader.dataset.data_root == "data/fashion_scenes"
        assert big.train_cfg.max_iters == iters and base.train_cfg.max_iters == 12000
        assert [dict(s, end=None) for s in big.param_scheduler] == [dict(s, end=None) for s in base.param_scheduler]
        assert [s["end"] for s in big.param_scheduler] == [100, iters]
        assert big.train_cfg.val_interval == base.train_cfg.val_interval
        for key in ("model", "optim_wrapper", "test_dataloader", "default_hooks", "randomness"):
            assert big.get(key) == base.get(key), key
        assert dict(big.train_dataloader.dataset, data_root=None) == dict(base.train_dataloader.dataset, data_root=None)


def test_the_shift_recipe_is_the_own_scale_one_with_a_shift_for_resize_and_crop():
    """The bundled (shift) recipe changes the own-scale recipe bundled before it in the training pipeline only:
    RandomTranslate(max_shift=8) where that one has its no-op RandomResize + RandomCrop; everything else (model,
    schedule, the other transforms) is the same."""
    for m in ("sa", "ea", "effa", "ff"):
        base = _cfg(os.path.join(ROOT, f"configs/seg/upernet_{m}-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-"
                                       f"head4to32-norescale.py"))
        shift = _cfg(os.path.join(ROOT, f"configs/seg/upernet_{m}-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-"
                                        f"head4to32-shift8.py"))
        pipe = shift.train_dataloader.dataset.pipeline
        kept = [t for t in base.train_dataloader.dataset.pipeline if t["type"] not in ("RandomResize", "RandomCrop")]
        assert [t["type"] for t in pipe] == [kept[0]["type"], kept[1]["type"], "RandomTranslate",
                                             *[t["type"] for t in kept[2:]]]
        assert pipe[2]["max_shift"] == 8
        assert [t for t in pipe if t["type"] != "RandomTranslate"] == kept
        for key in ("model", "optim_wrapper", "param_scheduler", "train_cfg", "val_dataloader"):
            assert shift[key] == base[key], key


def test_the_bundled_scenes_recipe_starts_every_trunk_from_its_classifier_and_is_one_recipe():
    """The seg_scenes recipe: 24,000 iterations on the 40,000 scenes of `make scenes40k`, patch 4, the trunk from
    the same mixer's bundled Fashion-MNIST classifier (ff's token-mixing layers fresh: they are shaped by the token
    count), the neck rescaled so the head sees the token grid's 16x16 map and coarser ones (strides 4-32), the
    training scenes at their own scale and shifted by up to 8 whole pixels instead of rescaled and cropped (the only
    change to the data pipeline); and apart from the backbone's name and start (and ff's sliding inference) the four
    configs are the same recipe."""
    from tests.load_tool import load_tool
    mw = load_tool("make_weights")
    scratch = _cfg(os.path.join(ROOT, "configs/seg/upernet_ea-vit-micro_1xb16-1500_fashion-scenes-64x64.py"))
    plain = {}
    for m in ("sa", "ea", "effa", "ff"):
        path = mw.RECIPES["seg"][1].format(m=m)
        assert path == (f"configs/seg/upernet_{m}-vit-micro-p4_1xb16-24000_fashion-scenes40k-64x64"
                        "-head4to32-shift8.py")
        cfg = _cfg(os.path.join(ROOT, path))
        bb = cfg.model.backbone
        assert (bb.name, bb.patch_size, tuple(bb.img_size)) == (f"{m}_vit_micro", 4, (64, 64))
        assert bb.init_cfg.type == "Pretrained" and bb.init_cfg.checkpoint == f"{m}_vit_micro.cls_fmnist"
        assert bb.init_cfg.get("skip") == (["blocks.*.mixer.*"] if m == "ff" else None)
        assert mw.starts_from(f"{m}_vit_micro.seg_scenes") == f"{m}_vit_micro.cls_fmnist"
        assert cfg.model.neck.scales == [1, 0.5, 0.25, 0.125] and scratch.model.neck.scales == [4, 2, 1, 0.5]
        assert (cfg.train_cfg.max_iters, cfg.train_cfg.val_interval, cfg.optim_wrapper.optimizer.lr) == (24000, 500,
                                                                                                           4e-3)
        assert cfg.param_scheduler[1].end == 24000 and cfg.default_hooks.checkpoint.interval == 1000
        # trained on the 40,000 scenes of `make scenes40k`, validated on the 500 of `make scenes` (the same scenes)
        assert cfg.train_dataloader.dataset.data_root == "data/fashion_scenes40k"
        assert cfg.val_dataloader.dataset.data_root == cfg.test_dataloader.dataset.data_root == "data/fashion_scenes"
        pipe = cfg.train_dataloader.dataset.pipeline
        assert not [t for t in pipe if t.type in ("RandomResize", "RandomCrop")]  # nothing resampled
        assert [(t.type, t.max_shift) for t in pipe if t.type == "RandomTranslate"] == [("RandomTranslate", 8)]
        loader = copy.deepcopy(cfg.train_dataloader)
        loader.dataset.pipeline = [t for t in pipe if t.type != "RandomTranslate"]
        ref = copy.deepcopy(scratch.train_dataloader)
        ref.dataset.pipeline = [t for t in ref.dataset.pipeline if t.type not in ("RandomResize", "RandomCrop")]
        assert ref.dataset.data_root == "data/fashion_scenes"
        ref.dataset.data_root = "data/fashion_scenes40k"
        assert loader == ref  # otherwise the data and augmentation are unchanged
        model = cfg.to_dict()["model"]
        model["backbone"] = {k: v for k, v in model["backbone"].items() if k not in ("name", "init_cfg")}
        model.pop("test_cfg")
        plain[m] = dict(model=model, optim=cfg.optim_wrapper.to_dict(), sched=cfg.param_scheduler,
                        train=cfg.train_cfg.to_dict())
    assert plain["sa"] == plain["ea"] == plain["effa"] == plain["ff"]


@pytest.mark.parametrize("iters, lr, ckpt_every, keep", [(6000, 1e-3, 6000, 3), (12000, 4e-3, 1000, 2)])
def test_the_longer_scenes_configs_change_the_schedule_only(iters, lr, ckpt_every, keep):
    """The 6,000- and 12,000-iteration scenes configs are the 2,000-iteration ones with a longer poly decay (and the
    12,000 one lr 4e-3 and a checkpoint to resume from every 1,000): model, data and evaluation are the same."""
    for m in ("sa", "ea", "effa", "ff"):
        short = _cfg(os.path.join(ROOT, f"configs/seg/upernet_{m}-vit-micro-p4_1xb16-2000_fashion-scenes-64x64.py"))
        long = _cfg(os.path.join(ROOT, f"configs/seg/upernet_{m}-vit-micro-p4_1xb16-{iters}_fashion-scenes-64x64.py"))
        for key in ("model", "train_dataloader", "val_dataloader", "val_evaluator"):
            assert long[key] == short[key], (m, key)
        opt, short_opt = long.optim_wrapper.to_dict(), short.optim_wrapper.to_dict()
        assert opt["optimizer"].pop("lr") == lr and short_opt["optimizer"].pop("lr") == 1e-3
        assert opt == short_opt
        assert (long.train_cfg.max_iters, long.train_cfg.val_interval) == (iters, 500)
        assert [s.get("end") for s in long.param_scheduler] == [100, iters]
        assert [{k: v for k, v in s.items() if k != "end"} for s in long.param_scheduler] == \
            [{k: v for k, v in s.items() if k != "end"} for s in short.param_scheduler]
        assert (long.default_hooks.checkpoint.interval, long.default_hooks.checkpoint.get("max_keep_ckpts")) == \
            (ckpt_every, keep)


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, "data/fashion_scenes")), reason="no scenes (make scenes)")
def test_train_starts_a_segmentor_from_a_seg_tag(tmp_path):
    """tools/train.py --pretrained ea_vit_micro.seg_scenes: the Runner trains the whole segmentor from the bundled
    weights (its backbone's init_cfg, the classifier start, does not overwrite them); at lr 0 every learned tensor of
    the saved checkpoint is the bundled one (batch norm's running statistics move in a training step)."""
    import subprocess
    import sys

    import zoo
    config = os.path.join(ROOT, "configs/seg/upernet_ea-vit-micro-p4_1xb16-6000_fashion-scenes-64x64.py")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools/train.py"), config, "--work-dir", str(tmp_path),
                        "--pretrained", "ea_vit_micro.seg_scenes", "--cfg-options", "train_cfg.max_iters=1",
                        "optim_wrapper.optimizer.lr=0.0", "optim_wrapper.optimizer.weight_decay=0.0",
                        "train_dataloader.batch_size=2"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    state = torch.load(tmp_path / "iter_1.pth", map_location="cpu", weights_only=False)["state_dict"]
    bundled = zoo.load("ea_vit_micro.seg_scenes").state_dict()
    learned = [k for k in bundled if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))]
    assert len(learned) > 50 and all(torch.equal(state[k], bundled[k].to(state[k].dtype)) for k in learned)


def test_published_cards_name_the_weights_the_trunk_started_from():
    from mmengine.config import Config

    from tests.load_tool import load_tool
    publish = load_tool("publish")
    cfg = _cfg(os.path.join(ROOT, "configs/seg/upernet_ff-vit-micro-p4_1xb16-6000_fashion-scenes-64x64.py"))
    assert publish.trunk_init(cfg) == {"trunk_init": {"source": "ff_vit_micro.cls_fmnist", "skip": ["blocks.*.mixer.*"]}}
    sa = _cfg(os.path.join(ROOT, "configs/seg/upernet_sa-vit-micro-p4_1xb16-6000_fashion-scenes-64x64.py"))
    assert publish.trunk_init(sa) == {"trunk_init": {"source": "sa_vit_micro.cls_fmnist"}}
    assert publish.trunk_init(_cfg(os.path.join(ROOT, "configs/seg/upernet_sa-vit-micro_1xb16-1500_fashion-scenes-"
                                                 "64x64.py"))) == {}
    assert publish.trunk_init(Config(dict(model=dict(name="ea_vit_micro")))) == {}


def test_ade20k_recipe_numbers():
    cfg = _cfg(os.path.join(ROOT, "configs/seg/upernet_ea-vit-base_8xb2-160k_ade20k-512x512.py"))
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.weight_decay) == ("AdamW", 6e-5, 0.01)
    assert {k: v.decay_mult for k, v in cfg.optim_wrapper.paramwise_cfg.custom_keys.items()} == {
        "pos_embed": 0.0, "cls_token": 0.0, "norm": 0.0}
    warm, poly = cfg.param_scheduler
    assert (warm.type, warm.end, poly.type, poly.begin, poly.end, poly.power) == ("LinearLR", 1500, "PolyLR", 1500,
                                                                                 160000, 1.0)
    assert cfg.train_cfg.max_iters == 160000 and cfg.train_dataloader.batch_size == 2
    assert cfg.train_dataloader.dataset.type == "ZooADE20KDataset"
    loads = [t for t in cfg.train_pipeline if t.type == "LoadCheckedAnnotations"]
    assert loads[0].reduce_zero_label is True
    assert [t.type for t in cfg.train_pipeline] == ["LoadImageFromFile", "LoadCheckedAnnotations", "RandomResize",
                                                    "RandomCrop", "RandomFlip", "PhotoMetricDistortion",
                                                    "PackSegInputs"]
    assert cfg.tta_model.type == "SegTTAModel" and cfg.val_evaluator.type == "IoUMetric"
    assert cfg.model.decode_head.norm_cfg.type == "BN"


def test_config_model_matches_zoo_load():
    import zoo
    cfg = _cfg(os.path.join(ROOT, "configs/seg/upernet_ea-vit-tiny_8xb2-160k_ade20k-512x512.py"))
    from_cfg = _build(cfg.model)
    from_load = zoo.load("ea_vit_tiny", task="seg", num_classes=150, img_size=512)
    assert {k: v.shape for k, v in from_cfg.state_dict().items()} == \
        {k: v.shape for k, v in from_load.state_dict().items()}
    assert from_cfg.zoo_config == from_load.zoo_config == dict(
        name="ea_vit_tiny", task="seg",
        args=dict(num_classes=150, img_size=512, patch_size=16, in_chans=3, channels=512, aux_channels=256))


@pytest.mark.parametrize("path, kwargs", [
    ("segformerhead_effa-vit-tiny_8xb2-160k_ade20k-512x512.py", dict(num_classes=150, img_size=512)),
    ("segformerhead_sa-vit-micro_1xb16-1500_fashion-scenes-64x64.py",
     dict(num_classes=11, img_size=64, patch_size=8, channels=64))])
def test_light_head_config_matches_zoo_load(path, kwargs):
    import zoo
    cfg = _cfg(os.path.join(ROOT, "configs/seg", path))
    from_cfg = _build(cfg.model)
    name = cfg.model.backbone.name
    from_load = zoo.load(name, task="seg", decode_head="segformer", **kwargs)
    assert {k: v.shape for k, v in from_cfg.state_dict().items()} == \
        {k: v.shape for k, v in from_load.state_dict().items()}
    assert from_cfg.zoo_config == from_load.zoo_config
    assert from_cfg.zoo_config["args"]["decode_head"] == "segformer"
    assert type(from_cfg.neck).__name__ == "Feature2Pyramid" and not from_cfg.with_auxiliary_head
    # the zoo_config rebuilds it
    again = zoo.load(name, task="seg", **from_cfg.zoo_config["args"])
    assert type(again.decode_head).__name__ == "SegformerHead"


@pytest.mark.parametrize("path", CONFIGS, ids=os.path.basename)
def test_config_builds_and_steps(path):
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    m = NAME.search(os.path.basename(path))
    assert m, (f"config name does not follow <upernet|segformerhead>_<mixer>-vit-<size>_<n>xb<b>-<iters>_<data>-"
               f"<h>x<w>[-<variant>].py: {path}")
    cfg = _cfg(path)
    mixer, size = m["mixer"], m["size"]
    assert cfg.model.backbone.name == f"{mixer}_vit_{size}"
    if m["patch"]:
        assert cfg.model.backbone.patch_size == int(m["patch"])
    crop = (int(m["h"]), int(m["w"]))
    assert tuple(cfg.model.backbone.img_size) == crop == tuple(cfg.crop_size)
    assert cfg.model.test_cfg.mode == ("slide" if mixer == "ff" else "whole")
    assert cfg.train_dataloader.batch_size == int(m["batch"])

    # 1) the real model, as configured (construction only)
    real = _build(cfg.model)
    from zoo.backbones.vit import SIZES
    dim = SIZES[size]["embed_dim"]
    assert real.backbone.trunk.embed_dim == dim and list(real.decode_head.in_channels) == [dim] * 4
    light = m["head"] == "segformerhead"
    assert type(real.decode_head).__name__ == ("SegformerHead" if light else "UPerHead")
    assert real.with_auxiliary_head is not light
    assert real.backbone.trunk.patch_embed.img_size == crop
    n_cls = len(real.decode_head.conv_seg.bias)
    del real

    # 2) one loss step (with the config's optimiser) and one predict step on the shrunk copy
    shrink = {"model.backbone.name": f"{mixer}_vit_micro", "model.backbone.img_size": (64, 64),
              "model.data_preprocessor.size": (64, 64), "model.decode_head.channels": 32,
              # the configs' ImageNet start (init_cfg Pretrained TAG) is for their own size, not the micro copy
              "model.backbone.init_cfg": None}
    if not light:
        shrink["model.auxiliary_head.channels"] = 16
    if mixer == "ff":
        shrink.update({"model.test_cfg.crop_size": (64, 64), "model.test_cfg.stride": (42, 42)})
    cfg.merge_from_dict(shrink)
    model = _build(cfg.model)
    model.init_weights()
    with DefaultScope.overwrite_default_scope("mmseg"):
        optim = build_optim_wrapper(model, cfg.optim_wrapper)
    # the no-decay keys reach the parameter groups
    wd = {id(p): g["weight_decay"] for g in optim.optimizer.param_groups for p in g["params"]}
    trunk = model.backbone.trunk
    assert wd[id(trunk.pos_embed)] == 0 and wd[id(trunk.cls_token)] == 0 and wd[id(trunk.blocks[0].norm2.weight)] == 0
    assert wd[id(trunk.blocks[0].mlp.fc1.weight)] == cfg.optim_wrapper.optimizer.weight_decay
    before = trunk.blocks[0].mlp.fc1.weight.detach().clone()
    model.train()
    log = model.train_step(_batch(n_cls), optim)
    assert torch.isfinite(log["loss"]) and "decode.loss_ce" in log and ("aux.loss_ce" in log) is not light
    assert not torch.equal(before, trunk.blocks[0].mlp.fc1.weight)  # the step updated the trunk
    model.eval()
    with torch.no_grad():
        out = model.val_step(_batch(n_cls, size=80 if mixer == "ff" else 64, n=1))  # ff: > crop, slides
    pred = out[0].pred_sem_seg.data
    assert pred.shape[-2:] == out[0].metainfo["ori_shape"] and int(pred.max()) < n_cls

    # 3) what a published folder of this model rebuilds (its zoo_config) is this model: same outputs, same weights
    from tasks.common.evaluate import same_model
    from zoo.hub import build_from_config
    again = build_from_config(model.zoo_config)
    again.load_state_dict(model.state_dict())
    assert same_model(again, model, "zoo_config", os.path.basename(path), atol=1e-5) <= 1e-5


def test_light_head_base_reads_the_recipe_of_zoo_load():
    """The light head's base config takes its model from zoo.heads.seg.model_cfg(decode_head='segformer'), as
    upernet_zoo-vit.py does for UPerNet: one source for the recipe."""
    from zoo.heads.seg import model_cfg
    path = os.path.join(ROOT, "configs/seg/_base_/models/segformerhead_zoo-vit.py")
    assert re.search(r"^model = model_cfg\(", open(path).read(), re.M)
    expected = model_cfg("sa_vit_base", num_classes=150, img_size=512, patch_size=16, drop_path_rate=0.1,
                         decode_head="segformer").to_dict()
    expected["backbone"]["checkpoint"] = None
    expected["test_cfg"]["return_logits"] = False  # the configs evaluate labels only (ZooEncoderDecoder.predict)
    assert _cfg(path).model.to_dict() == expected


def test_tta_turns_the_logits_back_on():
    # the configs evaluate labels only; mmseg's SegTTAModel merges each view's seg_logits, so --tta needs them
    from tests.load_tool import load_tool
    tool = load_tool("test")
    cfg = _cfg(os.path.join(ROOT, "configs/seg/segformerhead_ea-vit-tiny_8xb2-160k_ade20k-512x512.py"))
    assert cfg.model.test_cfg.return_logits is False
    tool.apply_tta(cfg)
    assert cfg.model.type == "SegTTAModel" and cfg.model.module.test_cfg.return_logits is True


def test_publish_writes_the_neck_rescaling_and_refuses_a_folder_that_loads_as_another_model(tmp_path, monkeypatch):
    """tools/publish.py from a patch-4 scenes checkpoint: config.json records the neck's 1, 1/2, 1/4, 1/8 and the
    folder loads as the checkpoint's model. If zoo_config missed it (as it once did), nothing is written silently:
    publish stops and names the argument."""
    import json

    import zoo
    from tests.load_tool import load_tool
    publish = load_tool("publish")
    config = os.path.join(ROOT, "configs/seg/"
                          "upernet_sa-vit-micro-p4_1xb16-12000_fashion-scenes-64x64-head4to32-shift8.py")
    trained = zoo.load("sa_vit_micro.seg_scenes")
    ckpt, metrics = tmp_path / "iter_12000.pth", tmp_path / "metrics.json"
    torch.save(dict(state_dict=trained.state_dict(), meta=dict(iter=12000)), ckpt)
    metrics.write_text(json.dumps(dict(mIoU=44.59)))
    argv = ["--config", config, "--checkpoint", str(ckpt), "--repo-id", "zoo-models/sa_vit_micro.seg_scenes",
            "--metrics", str(metrics), "--tag", "sa_vit_micro.seg_scenes", "--no-upload"]
    assert publish.main([*argv, "--out", str(tmp_path / "ok")]) == 0
    with open(tmp_path / "ok" / "config.json") as f:
        assert json.load(f)["args"]["neck_scales"] == [1, 0.5, 0.25, 0.125]
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(zoo.load(f"local-dir:{tmp_path / 'ok'}").eval()(x), trained.eval()(x))
    monkeypatch.setattr("zoo.heads.seg.neck_scales_of", lambda neck: None)  # zoo_config forgets the neck
    # both zoo_configs now agree (neither names the neck), so only the outputs can tell
    with pytest.raises(SystemExit, match=r"zoo.load rebuilds another model than the model of configs/seg/upernet_sa"
                                         r".* differ: none\)\. The model has a constructor choice"):
        publish.main([*argv, "--out", str(tmp_path / "stale")])
