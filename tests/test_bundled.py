"""The checkpoints bundled under pretrained/ load and score what their records say (evaluation is deterministic).

Fast: each one is scored on the fixed slice of its evaluation split that ``tools/make_weights.py`` scored when it
made the checkpoint (``results/metrics/<tag>.json``: ``slice``), one thread, and must get the same numbers.
Slow (``make test-slow``): each one is scored on the whole split and must match its card (``config.json``), which
came from ``tools/test.py --json-out``.

"The same" allows for the CPU: torch runs AVX2 or AVX-512 kernels by what the CPU has, whose summation orders
differ, so a model's outputs differ in the last bits between the two (2e-7 in a classifier's logits). Label-valued
metrics (top-1, mIoU, OA) came out identical when the AVX2-made records were scored on an AVX-512 EPYC; the GANs'
FIDs moved by up to 3.6e-6 relative. ``MATCH`` (relative 1e-4) allows that and still fails on any real change:
another checkpoint, sample seed or preprocessing moves an FID by whole units and a top-1 by 0.2 (one of 500).
"""
import json
import os

import pytest
import torch

from tests.load_tool import load_tool
from zoo import pretrained

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATCH = dict(rel=1e-4, abs=1e-6)  # float rounding between CPUs' kernels, see the module docstring
TAGS = sorted(t for t, e in pretrained.read_index().items() if os.path.isdir(e.bundled_dir))


def _record(tag):
    with open(os.path.join(ROOT, "results", "metrics", f"{tag}.json")) as f:
        return json.load(f)


def _make_weights():
    """``tools/make_weights.py`` as a module."""
    return load_tool("make_weights")


def _score(tag, max_samples=None, tmp_path=None):
    from tasks.common.evaluate import SLICE_OPTIONS, config_of, evaluate
    task = pretrained.parse_tag(tag).task
    options = SLICE_OPTIONS.get(task) if max_samples is not None else None
    return evaluate(config_of(tag), tag, work_dir=str(tmp_path), max_samples=max_samples, cfg_options=options)


def test_every_tag_is_bundled_with_its_record():
    index = pretrained.read_index()
    assert TAGS == sorted(t for t, e in index.items() if e.metrics_source == "measured here")
    for tag in TAGS:
        files = sorted(os.listdir(os.path.join(ROOT, "pretrained", tag)))
        assert files == ["README.md", "config.json", "model.safetensors"], tag
        rec = _record(tag)
        assert rec["metrics"] == index[tag].metrics, f"{tag}: card and tools/test.py record differ"


@pytest.mark.parametrize("tag", TAGS)
def test_bundled_checkpoint_scores_its_slice(tag, one_thread, tmp_path):
    rec = _record(tag)["slice"]
    got = _score(tag, rec["num_samples"], tmp_path)
    assert got == pytest.approx(rec["metrics"], **MATCH)


@pytest.mark.parametrize("tag", TAGS)
def test_zoo_load_of_a_bundled_tag_is_the_model_its_card_scored(tag, one_thread):
    """Cards are scored by the training config's model holding the weights; users get what config.json rebuilds.
    The two must be one model: the seg folders once left out the neck's rescaling (no weights show it), and
    ``zoo.load`` gave 31.4 mIoU where the card says 44.6."""
    from tasks.common.evaluate import check_rebuilds, config_of
    assert check_rebuilds(config_of(tag), tag) <= 1e-4


def test_a_folder_that_rebuilds_another_model_than_its_config_is_refused(tmp_path, one_thread):
    """The earlier seg folders' flaw, remade: weights of the patch-4 scenes model in a folder whose config.json
    leaves out the neck's rescaling. The weights load without a key mismatch; check_rebuilds says what differs."""
    import zoo
    from tasks.common.evaluate import check_rebuilds
    from zoo import hub
    config = "configs/seg/upernet_sa-vit-micro-p4_1xb16-24000_fashion-scenes40k-64x64-head4to32-shift8.py"
    trained = zoo.load("sa_vit_micro.seg_scenes")
    stale = zoo.load("sa_vit_micro", task="seg", num_classes=11, img_size=64, patch_size=4, channels=64,
                     aux_channels=32)
    stale.load_state_dict(trained.state_dict())
    hub.save_pretrained(stale, str(tmp_path / "stale"), tag="sa_vit_micro.seg_scenes", config_name=config)
    with pytest.raises(ValueError, match=r"neck_scales: config.json None vs .* \[1, 0.5, 0.25, 0.125\].*--repack"):
        check_rebuilds(os.path.join(ROOT, config), f"local-dir:{tmp_path / 'stale'}")


@pytest.mark.slow
@pytest.mark.parametrize("tag", TAGS)
def test_bundled_checkpoint_matches_its_card(tag, one_thread, tmp_path):
    card = pretrained.read_index()[tag].metrics
    got = _score(tag, None, tmp_path)
    assert {k: got[k] for k in card} == pytest.approx(card, rel=MATCH["rel"], abs=1e-4)


def test_tools_test_scores_a_tag(tmp_path):
    """``tools/test.py CONFIG --pretrained TAG`` is the same evaluation: it reproduces the recorded slice."""
    if not TAGS:
        pytest.skip("no bundled checkpoints in this checkout")
    from tasks.common.evaluate import config_of
    from .test_train_cls import run_tool
    tag = next((t for t in TAGS if pretrained.parse_tag(t).task == "pcls"), TAGS[0])
    rec = _record(tag)["slice"]
    out = tmp_path / "m.json"
    proc = run_tool([os.path.join(ROOT, "tools", "test.py"), config_of(tag), "--pretrained", tag, "--work-dir",
                     tmp_path / "w", "--json-out", out, "--cfg-options", "test_dataloader.sampler.type=FirstNSampler",
                     f"test_dataloader.sampler.num_samples={rec['num_samples']}"], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text())["metrics"] == pytest.approx(rec["metrics"], **MATCH)


@pytest.mark.slow  # about a minute: tools/test.py and the post measurement of a pcls folder (make test-slow)
def test_repack_rewrites_a_float32_folder_in_float16_and_measures_it_again(tmp_path):
    """``tools/make_weights.py --repack``: a float32 folder becomes the float16 one, whose metrics are measured again
    by ``tools/test.py`` (the float32 ones kept as ``checkpoint_metrics``). The float32 folder here is a bundled
    checkpoint cast up, so the float16 rewrite must give back the bundled file byte for byte, and its measured
    metrics the bundled card's, while the made-up metric of the float32 folder only survives as the 'before'."""
    import shutil
    from safetensors.torch import load_file
    import zoo
    tag = "sa_vit_micro.pcls_shapes"
    if tag not in TAGS:
        pytest.skip("no bundled pcls checkpoint in this checkout")
    bundled = os.path.join(ROOT, "pretrained", tag)
    with open(os.path.join(bundled, "config.json")) as f:
        cfg = json.load(f)
    out, res = tmp_path / "pretrained", tmp_path / "results"
    zoo.save_pretrained(zoo.load(tag), out / tag, metrics={"OA": 1.0}, dataset=cfg["dataset"], tag=tag,
                        config_name=cfg["training_config"], label_names=cfg["label_names"], input_spec=cfg["input"],
                        license=cfg["license"], extra={k: cfg[k] for k in ("hf_hub_id", "training")})
    assert {v.dtype for v in load_file(str(out / tag / "model.safetensors")).values()} >= {torch.float32}
    (res / "metrics").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "results", "metrics", f"{tag}.json"), res / "metrics")
    mw = _make_weights()
    argv = ["--repack", "--tags", tag, "--out", str(out), "--results", str(res), "--work-root", str(tmp_path / "w"),
            "--jobs", "1"]
    assert mw.main(argv) == 0
    with open(out / tag / "config.json") as f:
        new = json.load(f)
    assert new["weights"]["sha256"] == cfg["weights"]["sha256"] and new["weights"]["dtype"] == cfg["weights"]["dtype"]
    assert new["metrics"] == pytest.approx(cfg["metrics"], abs=1e-6)
    with open(res / "metrics" / f"{tag}.json") as f:
        rec = json.load(f)
    before = _record(tag)
    assert rec["metrics"] == new["metrics"] and rec["checkpoint_metrics"]["metrics"] == {"OA": 1.0}
    assert (rec["threads"], rec["seed"], rec["throughput"]) == (before["threads"], before["seed"], before["throughput"])
    assert rec["dtype"] == "float16" and rec["slice"]["metrics"] == pytest.approx(before["slice"]["metrics"], abs=1e-6)
    # Again on the float16 folder: the same tensors come out, so nothing is measured again and the record stays.
    assert mw.main(argv) == 0
    with open(res / "metrics" / f"{tag}.json") as f:
        assert json.load(f) == rec
    assert json.loads((out / tag / "config.json").read_text())["weights"]["sha256"] == cfg["weights"]["sha256"]
    # Into another precision it would round the float16 values a second time: refused, the folder kept.
    with pytest.raises(SystemExit, match="stores .*float16.* weights: --repack reads a float32 folder"):
        mw.repack(tag, None, mw.parse_args([*argv, "--dtype", "bfloat16"]))
    assert not (out / f"{tag}.new").exists()
    assert json.loads((out / tag / "config.json").read_text())["weights"]["sha256"] == cfg["weights"]["sha256"]


def test_make_weights_another_seed_never_replaces_the_published_run():
    mw = _make_weights()
    rel = lambda a: {k: os.path.relpath(getattr(a, k), ROOT) for k in ("out", "results", "work_root")}  # noqa: E731
    assert rel(mw.parse_args([])) == dict(out="pretrained", results="results", work_root="work_dirs/weights")
    assert rel(mw.parse_args(["--seed", "2"])) == dict(out="work_dirs/seeds/seed2/pretrained",
                                                       results="results/seeds/seed2", work_root="work_dirs/seeds/seed2")
    assert rel(mw.parse_args(["--seed", "2", "--out", "pretrained"]))["out"] == "pretrained"  # asked for: allowed
    assert mw._in_repo(os.path.join(ROOT, "work_dirs", "seeds")) == "work_dirs/seeds"
    assert mw._in_repo("/elsewhere/runs") == "/elsewhere/runs"


def test_make_weights_another_recipe_is_a_study_next_to_the_published_run(capsys):
    mw = _make_weights()
    short = "configs/seg/upernet_{m}-vit-micro-p4_1xb16-2000_fashion-scenes-64x64.py"
    args = mw.parse_args(["--recipe", f"seg={short}"])
    study = "work_dirs/recipes/upernet_m-vit-micro-p4_1xb16-2000_fashion-scenes-64x64"
    assert {k: os.path.relpath(getattr(args, k), ROOT) for k in ("out", "results", "work_root")} == dict(
        out=f"{study}/pretrained", results=f"{study}/results", work_root=study)
    assert mw._recipe_flags("ea_vit_micro.seg_scenes", args) == f" --recipe seg={short}"
    assert mw._recipe_flags("ea_vit_micro.cls_fmnist", args) == ""  # other tasks keep the published recipe
    assert mw.main(["--recipe", f"seg={short}", "--tasks", "seg", "cls", "--mixers", "ea", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert listed == ["ea_vit_micro.seg_scenes", short.format(m="ea"), "ea_vit_micro.cls_fmnist",
                      mw.RECIPES["cls"][1].format(m="ea")]
    with pytest.raises(SystemExit):
        mw.parse_args(["--recipe", "seg=configs/seg/one.py"])  # no {m}: not a recipe for the four mixers
    assert "TASK=CONFIG" in capsys.readouterr().err


def test_make_weights_starts_the_seg_trunk_from_the_classifier_made_in_the_same_run(tmp_path, monkeypatch):
    """seg's recipe starts from the mixer's cls checkpoint: given in any order, the seg job runs after the cls job
    of its run and starts from the folder that job wrote; without one, from the bundled folder; a failed
    classifier fails the seg job instead of starting it from the old weights."""
    import hashlib
    import time
    mw = _make_weights()
    events = []

    def fake_make_one(tag, config, args):
        events.append(("start", tag))
        if ".cls_" in tag:
            time.sleep(0.5)  # the seg job, submitted on the second worker, would start meanwhile
            if "ff_" in tag:
                raise RuntimeError("training diverged")
            os.makedirs(os.path.join(args.out, tag))
            with open(os.path.join(args.out, tag, "model.safetensors"), "wb") as f:
                f.write(b"new " + tag.encode())
        else:
            events.append(("init", mw._trunk_init(tag, args)))
        events.append(("end", tag))

    monkeypatch.setattr(mw, "make_one", fake_make_one)
    out = tmp_path / "out"
    base = ["--out", str(out), "--results", str(tmp_path / "r"), "--work-root", str(tmp_path / "w"), "--jobs", "2"]
    assert mw.main(["--tags", "ea_vit_micro.seg_scenes", "ea_vit_micro.cls_fmnist", *base]) == 0
    assert events.index(("end", "ea_vit_micro.cls_fmnist")) < events.index(("start", "ea_vit_micro.seg_scenes"))
    init = next(e[1] for e in events if e[0] == "init")
    assert init == dict(tag="ea_vit_micro.cls_fmnist", folder=str(out / "ea_vit_micro.cls_fmnist"),
                        sha256=hashlib.sha256(b"new ea_vit_micro.cls_fmnist").hexdigest())
    bundled = mw._trunk_init("sa_vit_micro.seg_scenes", mw.parse_args(base))
    with open(os.path.join(ROOT, "pretrained", "sa_vit_micro.cls_fmnist", "model.safetensors"), "rb") as f:
        assert bundled == dict(tag="sa_vit_micro.cls_fmnist", folder="pretrained/sa_vit_micro.cls_fmnist",
                               sha256=hashlib.sha256(f.read()).hexdigest())
    assert mw._trunk_init("sa_vit_micro.pcls_shapes", mw.parse_args(base)) is None
    # what make_one hands to tools/train.py, and keeps for the record
    monkeypatch.undo()
    commands = []
    monkeypatch.setattr(mw, "_run", lambda cmd, log, env: commands.append(cmd))
    monkeypatch.setattr(mw, "package", lambda tag, config, args, train_s=None: None)
    mw.make_one("ea_vit_micro.seg_scenes", "configs/seg/x.py", mw.parse_args(base))
    assert f"model.backbone.init_cfg.checkpoint={out / 'ea_vit_micro.cls_fmnist'}" in commands[0]
    with open(tmp_path / "w" / "ea_vit_micro.seg_scenes" / "trunk_init.json") as f:
        assert json.load(f) == init
    monkeypatch.setattr(mw, "make_one", fake_make_one)
    events.clear()
    assert mw.main(["--tags", "ff_vit_micro.seg_scenes", "ff_vit_micro.cls_fmnist", *base]) == 1
    assert ("start", "ff_vit_micro.seg_scenes") not in events


def _run_records(first, last, val_every=500, log_every=50):
    """mmengine's ``scalars.json`` records of an iteration loop from ``first`` to ``last``: a training record every
    ``log_every`` iterations and a validation after every ``val_every``-th."""
    out = []
    for it in range(first, last + 1, log_every):
        out.append({"iter": it, "step": it, "loss": 1.0 / it})
        if it % val_every == 0:
            out.append({"mIoU": it / 100, "step": it})
    return out


def test_a_resumed_training_is_one_curve_and_its_time_counts_the_run_before(tmp_path, monkeypatch):
    """``--resume`` after a run died at 1,800 iterations goes on from ``iter_1000.pth``: the curve is the first run
    up to that checkpoint and the resumed run after it (no iteration twice, the dead run's validation at 1,500
    dropped), and the training time adds the first run's time up to the checkpoint, also when packaged again."""
    import time
    mw = _make_weights()
    dead, resumed = _run_records(50, 1800), _run_records(1050, 3000)
    curve = mw.merge_runs([dead, resumed])
    iters = [r["iter"] for r in curve if "iter" in r]
    assert iters == list(range(50, 3001, 50))
    assert [r["step"] for r in curve if "mIoU" in r] == [500, 1000, 1500, 2000, 2500, 3000]
    assert next(r for r in curve if r.get("mIoU") == 15.0) is resumed[next(
        i for i, r in enumerate(resumed) if r.get("mIoU") == 15.0)]
    # a resume stopped early and resumed again from the same checkpoint: its records go too
    assert mw.merge_runs([dead, _run_records(1050, 1400), resumed]) == curve
    assert mw.merge_runs([resumed]) == resumed
    # the time: from the dead run's start (its folder's name) to the checkpoint it wrote
    tag = "effa_vit_micro.seg_scenes"
    work = tmp_path / "w" / tag
    (work / "20261203_121902").mkdir(parents=True)
    ckpt = work / "iter_1000.pth"
    torch.save(dict(meta=dict(iter=1000)), ckpt)  # written before FastResumeHook: no generator states
    start = time.mktime(time.strptime("20261203_121902", "%Y%m%d_%H%M%S"))
    os.utime(ckpt, (start + 651, start + 651))
    (work / "last_checkpoint").write_text(str(ckpt))
    commands, packaged = [], {}
    monkeypatch.setattr(mw, "_run", lambda cmd, log, env: commands.append(cmd))
    monkeypatch.setattr(mw, "package", lambda tag, config, args, train_s=None: packaged.update(train_s=train_s))
    args = mw.parse_args(["--work-root", str(tmp_path / "w"), "--out", str(tmp_path / "o"), "--resume"])
    mw.make_one(tag, "configs/seg/x.py", args)
    assert "--resume" in commands[0] and (work / "20261203_121902").is_dir()  # nothing of the first run removed
    assert json.loads((work / "resumed.json").read_text()) == [dict(checkpoint="iter_1000.pth", earlier_seconds=651,
                                                                        exact=False)]
    assert 651 <= packaged["train_s"] < 651 + 60
    # packaged again: the record's time when the record is of this checkpoint, else the work dir's runs
    (work / "20261203_125712").mkdir()
    ckpt = work / "iter_12000.pth"
    ckpt.write_bytes(b"")
    resumed_start = time.mktime(time.strptime("20261203_125712", "%Y%m%d_%H%M%S"))
    os.utime(ckpt, (resumed_start + 4700, resumed_start + 4700))
    rec = tmp_path / "rec.json"
    rec.write_text(json.dumps(dict(checkpoint="work_dirs/weights/x/iter_6000.pth", train_seconds=7000.0)))
    assert mw._packaged_train_seconds(str(rec), "w/x/iter_12000.pth", str(work), str(ckpt)) == 651 + 4700
    rec.write_text(json.dumps(dict(checkpoint="w/x/iter_12000.pth", train_seconds=5400.0)))
    assert mw._packaged_train_seconds(str(rec), "w/x/iter_12000.pth", str(work), str(ckpt)) == 5400.0
    assert mw._packaged_train_seconds(str(tmp_path / "none.json"), "c", str(tmp_path), str(ckpt)) is None


def test_make_weights_publishes_float16_and_scores_the_published_folder(tmp_path):
    """One tag through the whole of ``tools/make_weights.py`` (one training epoch): the folder stores float16, its
    card carries the metrics of ``tools/test.py --pretrained local-dir:`` on that folder, and the record keeps the
    float32 checkpoint's own test next to them."""
    from safetensors.torch import load_file
    mw = _make_weights()
    tag = "ea_vit_micro.pcls_shapes"
    out, res, work = tmp_path / "pretrained", tmp_path / "results", tmp_path / "w"
    assert mw.main(["--tags", tag, "--out", str(out), "--results", str(res), "--work-root", str(work), "--jobs", "1",
                    "--cfg-options", "train_cfg.max_epochs=1"]) == 0
    cfg = json.loads((out / tag / "config.json").read_text())
    stored = load_file(str(out / tag / "model.safetensors"))
    assert {v.dtype for v in stored.values() if v.is_floating_point()} == {torch.float16}
    published = json.loads((work / tag / "published_metrics.json").read_text())
    assert published["sha256"] == cfg["weights"]["sha256"] and published["metrics"] == cfg["metrics"]
    assert published["checkpoint"] == f"local-dir:{out / tag}.new"  # tested before it was moved into place
    rec = json.loads((res / "metrics" / f"{tag}.json").read_text())
    assert rec["metrics"] == cfg["metrics"] and rec["dtype"] == "float16" and rec["threads"] == 1
    checkpoint_test = json.loads((work / tag / "test_metrics.json").read_text())
    assert rec["checkpoint_metrics"]["metrics"] == checkpoint_test["metrics"]
    assert checkpoint_test["checkpoint"].endswith(".pth")  # the float32 training checkpoint
    assert (res / "curves" / f"{tag}.json").is_file() and not (out / f"{tag}.new").exists()


def test_make_weights_checkpoint_test_options_reach_the_float32_test_only(tmp_path, monkeypatch):
    """``--checkpoint-test-cfg-options`` (e.g. no Inception features for a GAN's float32 checkpoint) is added to the
    float32 checkpoint's test only; the published folder, whose metrics are the card's, gets the full test."""
    mw = _make_weights()
    base = ["--out", str(tmp_path / "p"), "--results", str(tmp_path / "r"), "--work-root", str(tmp_path / "w"),
            "--test-cfg-options", "model.eval_num_fakes=100"]
    args = mw.parse_args([*base, "--checkpoint-test-cfg-options", "test_evaluator.0.scores=[]"])
    commands, published = [], []
    monkeypatch.setattr(mw, "_last_checkpoint", lambda work_dir: "iter_1200.pth")
    monkeypatch.setattr(mw, "_run", lambda cmd, log, env: commands.append(cmd))
    monkeypatch.setattr(mw, "_test_published", lambda tag, config, folder, work_dir, a, log, env: published.append(
        a.test_cfg_options) or "published_metrics.json")
    monkeypatch.setattr(mw, "_finish", lambda tag, config, a, staging, card, checkpoint, *rest, **kw: (card,
                                                                                                 checkpoint))
    card, checkpoint = mw.package("ea_vit_micro.gen_fmnist", "configs/gen/x.py", args)
    tests = [c for c in commands if "tools/test.py" in c]
    assert len(tests) == 1 and tests[0][tests[0].index("--cfg-options") + 1:] == [
        "model.eval_num_fakes=100", "test_evaluator.0.scores=[]"]
    assert published == [["model.eval_num_fakes=100"]] and card == "published_metrics.json" != checkpoint
    # the record's command says how its metrics were measured
    assert mw._test_flags(args) == (" --test-cfg-options model.eval_num_fakes=100"
                                    " --checkpoint-test-cfg-options 'test_evaluator.0.scores=[]'")
    assert mw._test_flags(mw.parse_args(base[:-2])) == ""
    with pytest.raises(SystemExit):  # float32: the checkpoint's test is the card's, so it may not be cut down
        mw.parse_args([*base, "--dtype", "float32", "--checkpoint-test-cfg-options", "test_evaluator.0.scores=[]"])


def test_remeasure_throughput_replaces_only_the_throughput(tmp_path, monkeypatch):
    """``--remeasure-throughput`` times the published folders again (interleaved rounds, ``alone``), keeps the round
    with the median value and leaves the rest of the record as it was; missing folders are refused by name."""
    import shutil
    tags = [t for t in ("ea_vit_micro.cls_fmnist", "sa_vit_micro.cls_fmnist") if t in TAGS]
    if len(tags) < 2:
        pytest.skip("no bundled cls checkpoints in this checkout")
    out, res = tmp_path / "pretrained", tmp_path / "results"
    (res / "metrics").mkdir(parents=True)
    for tag in tags:
        shutil.copytree(os.path.join(ROOT, "pretrained", tag), out / tag)
        shutil.copy(os.path.join(ROOT, "results", "metrics", f"{tag}.json"), res / "metrics")
    mw = _make_weights()
    monkeypatch.setattr(mw.time, "strftime", lambda fmt, *a: "2026-12-07" if fmt == "%Y-%m-%d" else "00:00:00")
    order = []
    # 3 rounds of both tags, each round timing every tag once; made-up medians so the pick can be checked
    fake = iter([400.0, 100.0, 200.0, 300.0, 300.0, 200.0])

    def timed(model, min_run_time=3.0):
        order.append(model.pretrained_cfg["tag"])
        return dict(value=next(fake), unit="img/s", batch=64, threads=1, median_s=0.1, cpu="x", torch="t")
    monkeypatch.setattr(mw, "measure_throughput", timed)
    args = mw.parse_args(["--tags", *tags, "--out", str(out), "--results", str(res)])
    assert mw.remeasure_throughput(tags, args, rounds=3) == 0
    assert order == tags * 3  # interleaved
    for tag, values, median in zip(tags, ([400.0, 200.0, 300.0], [100.0, 300.0, 200.0]), (300.0, 200.0)):
        rec = json.loads((res / "metrics" / f"{tag}.json").read_text())
        t = rec.pop("throughput")
        assert rec == {k: v for k, v in _record(tag).items() if k != "throughput"}
        assert (t["value"], t["range"], t["rounds"], t["alone"], t["date"]) == (median, [min(values), max(values)],
                                                                              3, True, "2026-12-07")
    with pytest.raises(SystemExit, match="to measure again for .*ff_vit_micro.cls_fmnist"):
        mw.remeasure_throughput(["ff_vit_micro.cls_fmnist"], args)
    # the real timing: one thread, the CPU and torch it ran on
    monkeypatch.undo()
    import zoo
    t = mw.measure_throughput(zoo.load(f"local-dir:{out / tags[0]}").eval(), min_run_time=0.2)
    assert t["threads"] == 1 and t["torch"] == torch.__version__ and t["value"] == pytest.approx(
        t["batch"] / t["median_s"], rel=1e-3)


def test_make_weights_refine_resumes_a_stopped_head_training_only_with_resume(tmp_path, monkeypatch):
    """A work folder whose affinity folder holds only the head's training state: ``--resume`` keeps it and passes
    ``--resume`` to ``tasks.seg.affinity`` (which goes on from it, tests/test_seg_affinity.py); without it the folder
    is cleared and the head trains from the start."""
    import shutil
    tag = "sa_vit_micro.seg_scenes"
    if tag not in TAGS:
        pytest.skip("no bundled seg checkpoint in this checkout")
    mw = _make_weights()
    out, work = tmp_path / "pretrained", tmp_path / "w"
    shutil.copytree(os.path.join(ROOT, "pretrained", tag), out / tag)
    commands = []

    def run(cmd, log, env):
        commands.append(cmd)
        raise KeyboardInterrupt  # stop where the head would train
    monkeypatch.setattr(mw, "_run", run)
    monkeypatch.setattr(mw, "_data_roots", lambda config: ("scenes", "scenes"))
    for resume in (True, False):
        state = work / tag / "affinity" / "train_state.pt"
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_bytes(b"state")
        args = mw.parse_args(["--out", str(out), "--work-root", str(work), "--refine-only"]
                             + (["--resume"] if resume else []))
        with pytest.raises(KeyboardInterrupt):
            mw.refine(tag, "configs/seg/x.py", args)
        assert ("--resume" in commands[-1]) == resume and state.exists() == resume


def test_make_weights_refine_only_publishes_the_refined_segmentor_in_its_place(tmp_path, monkeypatch):
    """``--refine-only`` on a published seg folder: the affinity head is trained on the frozen segmentor (a few steps
    on written scenes here), the walk chosen on the tuning scenes, and the folder with both is tested by
    ``tools/test.py`` (the config's model takes the folder's ``refine``) and published in the segmentor's place; the
    record keeps the segmentor's own metrics and the probe's record."""
    import shutil
    import sys
    tag = "sa_vit_micro.seg_scenes"
    if tag not in TAGS:
        pytest.skip("no bundled seg checkpoint in this checkout")
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    from make_scenes import make_scenes
    scenes = tmp_path / "scenes"
    make_scenes(scenes, seed=3, num_train=8, num_val=3, size=64)
    out, res, work = tmp_path / "pretrained", tmp_path / "results", tmp_path / "w"
    shutil.copytree(os.path.join(ROOT, "pretrained", tag), out / tag)
    (res / "metrics").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "results", "metrics", f"{tag}.json"), res / "metrics")
    before = json.loads((out / tag / "config.json").read_text())
    mw = _make_weights()
    monkeypatch.setattr(mw, "REFINE", dict(iters=6, train_scenes=6, tune_data=str(scenes), tune_first=6,
                                           tune_scenes=2))
    monkeypatch.setattr(mw, "_data_roots", lambda config: (str(scenes), str(scenes)))
    assert mw.main(["--tags", tag, "--refine-only", "--out", str(out), "--results", str(res), "--work-root",
                    str(work), "--jobs", "1", "--test-cfg-options", f"test_dataloader.dataset.data_root={scenes}"]) == 0
    cfg = json.loads((out / tag / "config.json").read_text())
    probe = json.loads((work / tag / "affinity" / "record.json").read_text())
    assert cfg["args"]["refine"]["beta"] == probe["chosen"]["beta"]
    assert cfg["args"]["refine"]["steps"] == probe["chosen"]["steps"]
    measured = json.loads((work / tag / "refined_metrics.json").read_text())
    assert measured["metrics"] == cfg["metrics"] and measured["sha256"] == cfg["weights"]["sha256"]
    rec = json.loads((res / "metrics" / f"{tag}.json").read_text())
    assert rec["metrics"] == cfg["metrics"] and rec["segmentor_metrics"]["metrics"] == before["metrics"]
    assert rec["refine"]["chosen"] == probe["chosen"] and " --refine" in rec["command"]
    assert cfg["training"]["iter"] == before["training"]["iter"] and cfg["training"]["refine"]["iters"] == 6
    # the segmentor's weights are the same tensors; the head's are added
    from safetensors.torch import load_file
    old, new = load_file(os.path.join(ROOT, "pretrained", tag, "model.safetensors")), load_file(
        str(out / tag / "model.safetensors"))
    assert all(torch.equal(old[k], new[k]) for k in old)
    assert sorted(set(new) - set(old)) and all(k.startswith("affinity_head.") for k in set(new) - set(old))
    with pytest.raises(SystemExit):  # one mode at a time
        mw.parse_args(["--refine-only", "--package-only"])
    with pytest.raises(SystemExit, match="refined already"):
        mw.refine(tag, "configs/seg/x.py", mw.parse_args(["--out", str(out), "--results", str(res), "--work-root",
                                                            str(work), "--refine-only"]))
