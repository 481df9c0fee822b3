"""Train the bundled checkpoints from their configs, score them, and write them in the published layout.

``make weights`` runs this. For every tag ``{mixer}_vit_micro.{task}_{dataset}`` it:

1. trains the tag's config with ``tools/train.py`` (seed fixed, deterministic algorithms, one thread per job),
   into ``work_dirs/weights/<tag>/``;
2. scores the last checkpoint with ``tools/test.py --json-out`` on the task's evaluation split (no checkpoint
   selection: the last one is published, whatever the curve did);
3. writes ``pretrained/<tag>/`` with ``tools/publish.py --no-upload`` (``model.safetensors``, ``config.json``,
   the ``README.md`` card), i.e. exactly the folder that an upload would send;
4. keeps the validation curve (mmengine's ``scalars.json``) as ``results/curves/<tag>.json`` and the test metrics
   as ``results/metrics/<tag>.json``, with two more measurements of the published folder (``--post``, one thread):
   its metrics on a fixed slice of the evaluation split (``SLICES``; the fast test re-scores the bundled
   checkpoint on that slice and must get the same numbers) and its inference throughput; for a GAN also a grid of
   64 samples, ``results/samples/<tag>.png``.

The folder stores the weights in float16 (``--dtype``; loading casts them back to float32) and the published part of
the model only (a GAN's EMA generator): 20 folders in about 20 MB instead of 61. Rounding changes the model, so step
2 is repeated on the folder as written and its card carries those metrics; ``results/metrics/<tag>.json`` keeps the
float32 checkpoint's as ``checkpoint_metrics``. ``--repack`` rewrites float32 folders this way without retraining.
``--checkpoint-test-cfg-options`` makes that float32 test cheaper (a GAN's standard test, Inception features of 5,000
samples, took 20-30 minutes per job on the 2-core AVX2 EPYC, docs/weights.md): ``test_evaluator.0.scores=[]`` keeps
only the Fashion-MNIST classifier's scores.

``--resume`` goes on with stopped trainings from their last checkpoints instead of starting again; the record joins
the runs' curves at that checkpoint and counts the stopped runs' time up to it (``resumed``; its ``exact`` says
whether the checkpoint held the random generators' states, with which the resumed run repeats an unbroken one:
``FastResumeHook``). With ``--refine`` / ``--refine-only`` it also goes on with a stopped affinity head training
from its state of the last 500 steps (``tasks.seg.affinity.train``), to the same head bit for bit.

``--package-only`` redoes steps 3-4 from the finished trainings in the work dirs (after a change to the card or
the config.json layout), without training again (and without testing again when the test metrics exist).

``--remeasure-throughput`` measures the published folders' throughput again, in one process that times every tag
once per round for five rounds, and changes nothing else in the records: the figures recorded while trainings
shared the machine become ones taken alone (``throughput.alone``), which MODEL_CARDS.md then says.

Jobs run ``--jobs`` at a time (default 2, one per core of the machines this was made on); micro models use one
thread each better than two threads for one model. Examples::

    python tools/make_weights.py                          # all 20 tags
    python tools/make_weights.py --tasks cls --mixers ea  # one tag
    python tools/make_weights.py --list                   # the jobs and their configs

The data must exist first: ``make scenes scenes40k shapes`` (Fashion-MNIST comes from the Debian package; seg trains
on the 40,000 scenes of ``scenes40k`` and is scored on the validation scenes of ``scenes``).
"""
import argparse
import glob
import json
import os
import os.path as osp
import shlex
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

from zoo.checkpoint import load_torch  # noqa: E402
from zoo.pretrained import parse_tag  # noqa: E402

MIXERS = ("sa", "ea", "effa", "ff")
# task -> (dataset key of the tag, config path pattern). One recipe per task, the same for all four mixers.
RECIPES = {
    "cls": ("fmnist", "configs/cls/{m}-vit-micro-p4_1xb128-16e_fmnist-28.py"),
    "seg": ("scenes", "configs/seg/upernet_{m}-vit-micro-p4_1xb16-24000_fashion-scenes40k-64x64-head4to32-shift8.py"),
    "pcls": ("shapes", "configs/pcls/pct_{m}-vit-micro_1xb16-15e_shapes-256.py"),
    "pseg": ("shapes", "configs/pseg/pct_{m}-vit-micro_1xb16-40e_shapes-part-256.py"),
    "gen": ("fmnist", "configs/gen/sagan_{m}-vit-micro_1xb32-4800it_fmnist-32x32.py"),
}


# task -> the task whose bundled checkpoint of the same mixer the recipe starts its trunk from (the seg configs'
# backbone.init_cfg). When both are made in one run, the later one waits and starts from the folder just written.
STARTS_FROM = {"seg": "cls"}


# ``--refine``: the affinity refinement of a seg tag (``ZooEncoderDecoder(refine=...)``), trained after the segmentor
# by ``python -m tasks.seg.affinity`` on the frozen published folder: a head of ``iters`` steps on the first
# ``train_scenes`` training scenes of the recipe's own data, its walk (beta, steps) chosen on ``tune_scenes`` scenes
# that no network trained on (``make scenes-tune``: another seed of the same generator), the same for all mixers.
REFINE = dict(iters=8000, train_scenes=40000, tune_data="data/fashion_scenes_tune", tune_first=0, tune_scenes=500)

# Evaluation samples scored by the fast test of each bundled checkpoint (the first N of the evaluation split).
SLICES = {"cls": 500, "seg": 40, "pcls": 60, "pseg": 60, "gen": 500}
# Inputs of the throughput measurement: batch and the unit it is counted in.
THROUGHPUT_BATCH = {"cls": (64, "img/s"), "seg": (8, "img/s"), "pcls": (16, "clouds/s"), "pseg": (16, "clouds/s"),
                    "gen": (64, "img/s")}


def jobs(tasks, mixers, recipes=None):
    """``[(tag, config)]`` in the order given (``recipes``: config patterns replacing ``RECIPES``' for some tasks)."""
    recipes = recipes or {}
    return [(f"{m}_vit_micro.{t}_{RECIPES[t][0]}", recipes.get(t, RECIPES[t][1]).format(m=m))
            for t in tasks for m in mixers]


def _recipe_flags(tag, args):
    """The ``--recipe`` flag that reproduces ``tag``'s run, if its task's recipe was replaced, and ``--refine``."""
    task = parse_tag(tag).task
    flags = f" --recipe {task}={args.recipe[task]}" if task in args.recipe else ""
    return flags + (" --refine" if task == "seg" and (args.refine or args.refine_only) else "")


def _test_flags(args):
    """The test options that change what the record's metrics measured (for its ``command``)."""
    return "".join(f" --{name.replace('_', '-')} {' '.join(shlex.quote(o) for o in getattr(args, name))}"
                   for name in ("test_cfg_options", "checkpoint_test_cfg_options") if getattr(args, name))


def _cfg_options(options):
    """``tools/test.py`` arguments for a list of ``K=V`` config overrides (none for an empty list)."""
    return ["--cfg-options", *options] if options else []


def _run(cmd, log, env):
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.call(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {rc}; see {log}")


def _last_checkpoint(work_dir):
    with open(osp.join(work_dir, "last_checkpoint")) as f:
        return f.read().strip()


def _curve(work_dir):
    """The training's ``vis_data/scalars.json`` records under ``work_dir`` (one JSON record per logged step), made
    one curve over its runs (``merge_runs``) when it was resumed."""
    runs = sorted(glob.glob(osp.join(work_dir, "2*", "vis_data", "scalars.json")))
    if not runs:
        raise FileNotFoundError(f"no vis_data/scalars.json under {work_dir}")
    records = []
    for path in runs:
        with open(path) as f:
            records.append([json.loads(line) for line in f if line.strip()])
    return merge_runs(records)


def merge_runs(runs):
    """One curve from the records of a training's runs, oldest first.

    A run started with ``--resume`` goes on from the last checkpoint, so what the run before it logged after that
    checkpoint was done again: each earlier run is cut at its first training record (one with ``iter``) at or past
    the next run's first logged iteration, together with the evaluations logged after it. An evaluation logged by the
    run that was cut between the checkpoint and its next training record would be kept twice; the configs here
    evaluate on logged iterations only.
    """
    merged = []
    for records in runs:
        first = next((r["iter"] for r in records if "iter" in r), None)
        if first is not None:
            merged = merged[:next((i for i, r in enumerate(merged) if r.get("iter", -1) >= first), len(merged))]
        merged += records
    return merged


def _resume_point(work_dir):
    """``dict(checkpoint, earlier_seconds, exact)`` for a training resumed in ``work_dir``: the checkpoint it goes on
    from, the time from the start of the run that wrote it (mmengine names a run's folder by its start) to the
    checkpoint, and whether the checkpoint holds the random generators' states, so that the resumed run repeats an
    unbroken one (``FastResumeHook``); None when there is nothing to resume."""
    if not osp.isfile(osp.join(work_dir, "last_checkpoint")):
        return None
    ckpt = _last_checkpoint(work_dir)
    written = osp.getmtime(ckpt)
    start = max((t for t in _run_starts(work_dir) if t <= written), default=None)
    exact = "rng_state" in (load_torch(ckpt, map_location="cpu").get("meta") or {})
    return dict(checkpoint=osp.basename(ckpt), earlier_seconds=round(written - start, 1) if start else None,
                exact=exact)


def _run_starts(work_dir):
    """The start times of the training runs in ``work_dir``, oldest first (mmengine names a run's folder by its
    start, ``%Y%m%d_%H%M%S``)."""
    return sorted(time.mktime(time.strptime(osp.basename(r), "%Y%m%d_%H%M%S"))
                  for r in glob.glob(osp.join(work_dir, "2*_*")) if osp.isdir(r))


def _resumed_seconds(work_dir):
    """The stopped runs' time up to the checkpoints a training was resumed from (``resumed.json``, make_one)."""
    return sum(p["earlier_seconds"] or 0.0 for p in _read_json(osp.join(work_dir, "resumed.json"), []))


def _job(tag, args):
    """``(work dir, log file, environment)`` of one tag's subprocesses."""
    work_dir = osp.join(args.work_root, tag)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONHASHSEED="0")
    return work_dir, osp.join(work_dir, "make_weights.log"), env


def starts_from(tag):
    """The bundled tag whose weights ``tag``'s recipe starts its trunk from (``STARTS_FROM``), or None."""
    t = parse_tag(tag)
    first = STARTS_FROM.get(t.task)
    return f"{t.model}.{first}_{RECIPES[first][0]}" if first else None


def _trunk_init(tag, args):
    """``dict(tag, folder, sha256)`` of the weights ``tag``'s trunk starts from: the folder of ``starts_from(tag)``
    under ``--out`` (this run's, or the bundled one for the default ``--out``), else the bundled folder."""
    first = starts_from(tag)
    if first is None:
        return None
    for folder in (osp.join(args.out, first), osp.join(ROOT, "pretrained", first)):
        weights = osp.join(folder, "model.safetensors")
        if osp.isfile(weights):
            from zoo.hub import sha256_file
            return dict(tag=first, folder=_in_repo(folder), sha256=sha256_file(weights))
    raise FileNotFoundError(f"{tag} starts its trunk from {first}, which is neither under {args.out} nor bundled; "
                            f"make it first: python tools/make_weights.py --tags {first}")


def make_one(tag, config, args):
    """Train, test and package one tag; returns its test metrics."""
    work_dir, log, env = _job(tag, args)
    if osp.isdir(work_dir) and not args.resume:
        shutil.rmtree(work_dir)
    os.makedirs(work_dir, exist_ok=True)
    py = sys.executable
    t0 = time.time()
    init = _trunk_init(tag, args)
    init_options = [f"model.backbone.init_cfg.checkpoint={init['folder']}"] if init else []
    if init:
        with open(osp.join(work_dir, "trunk_init.json"), "w") as f:
            json.dump(init, f, indent=1)
    train = [py, "tools/train.py", config, "--work-dir", work_dir, "--cfg-options",
             f"randomness.seed={args.seed}", "randomness.deterministic=True", *init_options, *args.cfg_options]
    earlier = 0.0
    if args.resume:
        train.append("--resume")
        point = _resume_point(work_dir)
        if point:  # the training time counts the runs before, up to the checkpoints they were resumed from
            path = osp.join(work_dir, "resumed.json")
            points = _read_json(path, []) + [point]
            with open(path, "w") as f:
                json.dump(points, f, indent=1)
            earlier = _resumed_seconds(work_dir)
    _run(train, log, env)
    return package(tag, config, args, train_s=round(time.time() - t0 + earlier, 1))


def _packaged_train_seconds(rec_path, ckpt_rec, work_dir, ckpt):
    """The training time of a checkpoint packaged again (``--package-only``): the record's at ``rec_path`` when that
    record is of this checkpoint (``ckpt_rec``, its name in records), else from the work dir (``_runs_seconds``):
    a study's trainings packaged over the bundled records must not take the bundled runs' times."""
    old = _read_json(rec_path, {})
    if old.get("checkpoint") == ckpt_rec and old.get("train_seconds") is not None:
        return old["train_seconds"]
    return _runs_seconds(work_dir, ckpt)


def _runs_seconds(work_dir, ckpt):
    """The training time of ``ckpt`` from its work dir alone: from the newest run's start to the checkpoint, plus the
    stopped runs' time before a resume; None without runs."""
    starts = _run_starts(work_dir)
    if not starts:
        return None
    return round(osp.getmtime(ckpt) - starts[-1] + _resumed_seconds(work_dir), 1)


def _read_json(path, default):
    if not osp.isfile(path):
        return default
    with open(path) as f:
        return json.load(f)


def _test_published(tag, config, folder, work_dir, args, log, env, name="published_metrics"):
    """``tools/test.py --pretrained local-dir:FOLDER`` -> the metrics of the weights as published (``<name>.json`` in
    ``work_dir``, reused while the weights' sha256 is the one it was measured on)."""
    path = osp.join(work_dir, f"{name}.json")
    with open(osp.join(folder, "config.json")) as f:
        sha = json.load(f)["weights"]["sha256"]
    if osp.isfile(path):
        with open(path) as f:
            if json.load(f).get("sha256") == sha:
                return path
    raw = osp.join(work_dir, f"{name}.raw.json")
    _run([sys.executable, "tools/test.py", config, "--pretrained", f"local-dir:{osp.abspath(folder)}", "--work-dir",
          osp.join(work_dir, f"test_{name}"), "--json-out", raw, *_cfg_options(args.test_cfg_options)], log, env)
    with open(raw) as f:
        measured = json.load(f)
    with open(path, "w") as f:
        json.dump(dict(measured, sha256=sha), f, indent=1)
    return path


def package(tag, config, args, train_s=None):
    """Test (unless packaging only), write the published folder, test and measure it and record everything.

    The folder stores the weights in ``args.dtype``; when that rounds them (float16), the metrics of the card are
    measured again on the folder as written, and the record keeps both (``metrics``: as published;
    ``checkpoint_metrics``: the float32 training checkpoint).
    """
    work_dir, log, env = _job(tag, args)
    py = sys.executable
    ckpt = _last_checkpoint(work_dir)
    metrics_path = osp.join(work_dir, "test_metrics.json")
    if not args.package_only or not osp.isfile(metrics_path):
        _run([py, "tools/test.py", config, ckpt, "--work-dir", osp.join(work_dir, "test"), "--json-out",
              metrics_path, *_cfg_options([*args.test_cfg_options, *args.checkpoint_test_cfg_options])], log, env)
    out = osp.join(args.out, tag)
    staging = out + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    publish = [py, "tools/publish.py", "--config", config, "--checkpoint", ckpt, "--tag", tag, "--repo-id",
               f"{args.org}/{tag}", "--out", staging, "--no-upload", "--dtype", args.dtype]
    _run([*publish, "--metrics", metrics_path], log, env)
    card_metrics = metrics_path
    if args.dtype != "float32":  # the card's metrics are those of the stored weights: test them, write them in
        card_metrics = _test_published(tag, config, staging, work_dir, args, log, env)
        _run([*publish, "--metrics", card_metrics], log, env)
    return _finish(tag, config, args, staging, card_metrics, metrics_path, ckpt, train_s)


def _data_roots(config):
    """The training and test data folders of a config (``{train,test}_dataloader.dataset.data_root``)."""
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(ROOT, config))
    return cfg.train_dataloader.dataset.data_root, cfg.test_dataloader.dataset.data_root


def refine(tag, config, args):
    """``--refine``: train the affinity head of the published seg folder of ``tag`` (``REFINE``), test the folder with
    head and walk, and publish it in the segmentor's place; the record keeps the segmentor's own metrics
    (``segmentor_metrics``) and the probe's record (``refine``: the head's curve, the tuning sweep, the choice)."""
    import zoo
    from zoo import hub
    if parse_tag(tag).task != "seg":
        raise ValueError(f"--refine applies to seg tags only, not {tag}")
    work_dir, log, env = _job(tag, args)
    out = osp.join(args.out, tag)
    seg_cfg = hub.read_config(osp.join(out, "config.json"))
    if seg_cfg["args"].get("refine"):
        raise SystemExit(f"{out} is refined already; make the segmentor again first (its head trains on it)")
    staging, aff_dir = out + ".refined", osp.join(work_dir, "affinity")
    from tasks.seg.affinity import resumable
    # --resume goes on from where a stopped refinement was (its head's training state, written every 500 steps and at
    # the end of its training); the state itself refuses another segmentor, other data or other settings.
    resume = args.resume and resumable(aff_dir)
    for d in (staging,) if resume else (staging, aff_dir):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(work_dir, exist_ok=True)
    r, (train_root, test_root) = REFINE, _data_roots(config)
    _run([sys.executable, "-m", "tasks.seg.affinity", f"local-dir:{osp.abspath(out)}", "--out", aff_dir,
          "--iters", str(r["iters"]), "--train-data", train_root, "--train-scenes", str(r["train_scenes"]),
          "--data", test_root,
          "--tune-data", r["tune_data"], "--tune-first", str(r["tune_first"]), "--tune-scenes", str(r["tune_scenes"]),
          "--seed", str(args.seed), "--save-refined", staging] + (["--resume"] if resume else []), log, env)
    card_metrics = _test_published(tag, config, staging, work_dir, args, log, env, name="refined_metrics")
    folder = hub.read_config(osp.join(staging, "config.json"))
    with open(card_metrics) as f:
        metrics = json.load(f)["metrics"]
    hub.save_pretrained(zoo.load(f"local-dir:{osp.abspath(staging)}"), staging, metrics=metrics,
                        dataset=folder["dataset"], tag=tag, config_name=folder["training_config"],
                        label_names=folder["label_names"], input_spec=folder["input"], license=folder["license"],
                        extra={**{k: seg_cfg[k] for k in ("hf_hub_id",) if k in seg_cfg},
                               "training": folder["training"]},
                        dtype=args.dtype)
    with open(osp.join(args.results, "metrics", f"{tag}.json")) as f:
        before = json.load(f)
    with open(osp.join(aff_dir, "record.json")) as f:
        probe = json.load(f)
    segmentor = dict(metrics=before["metrics"],
                     weights=f"the published segmentor, sha256 {seg_cfg['weights']['sha256']}")
    return _finish(tag, config, args, staging, card_metrics, card_metrics, before["checkpoint"],
                   before["train_seconds"], keep_curve=True,
                   trained_with=dict(seed=before.get("seed", args.seed), threads=before.get("threads")),
                   extra=dict(segmentor_metrics=segmentor, refine=probe,
                              segmentor_checkpoint_metrics=before.get("checkpoint_metrics")))


def make_and_refine(tag, config, args):
    """``make_one``, then (seg tags) ``refine``."""
    metrics = make_one(tag, config, args)
    return refine(tag, config, args) if parse_tag(tag).task == "seg" else metrics


def _same_tensors(a, b):
    """Whether two safetensors files hold the same names, dtypes and values (headers may differ)."""
    import torch
    from safetensors.torch import load_file
    x, y = load_file(a), load_file(b)
    return x.keys() == y.keys() and all(x[k].dtype == y[k].dtype and torch.equal(x[k], y[k]) for k in x)


def repack(tag, config, args):
    """``--repack``: rewrite a published folder in ``args.dtype`` (and the published part only, e.g. the GAN's EMA
    generator) without its training run. When that changes the stored tensors (float32 -> float16), the folder is
    tested and measured again like a new one, the curve and training time kept; a folder already rounded to another
    precision is refused (it would be rounded twice). When the tensors come out the same (a rewrite for a new
    header or config.json layout), its metrics still hold and nothing is measured again. The architecture is the one
    the folder's training config builds (its weights loaded from the folder), and the rewritten folder must rebuild
    that model (``check_rebuilds``): so a repack also completes a config.json that missed a constructor choice."""
    import zoo
    from zoo import hub
    from tasks.common.evaluate import build_runner, check_rebuilds, zoo_model_of
    work_dir, log, env = _job(tag, args)
    os.makedirs(work_dir, exist_ok=True)
    out = osp.join(args.out, tag)
    cfg = hub.read_config(osp.join(out, "config.json"))
    # The architecture comes from the training config, the weights from the folder: a config.json that missed a
    # constructor choice (one without weights, e.g. the neck's rescaling) is written again complete.
    ref = f"local-dir:{osp.abspath(out)}"
    trained_with = osp.join(ROOT, cfg["training_config"])
    model = zoo_model_of(build_runner(trained_with, zoo.load(ref), max_samples=1), ref).eval()
    staging = out + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    extra = {k: cfg[k] for k in ("hf_hub_id", "training") if k in cfg}

    def save(metrics):
        hub.save_pretrained(model, staging, metrics=metrics, dataset=cfg["dataset"], tag=tag,
                            config_name=cfg["training_config"], label_names=cfg["label_names"],
                            input_spec=cfg["input"], license=cfg["license"], extra=extra, dtype=args.dtype)

    save(cfg["metrics"])
    check_rebuilds(trained_with, f"local-dir:{osp.abspath(staging)}")
    if _same_tensors(osp.join(out, "model.safetensors"), osp.join(staging, "model.safetensors")):
        shutil.rmtree(out)
        os.replace(staging, out)
        print(f"[{time.strftime('%H:%M:%S')}] {tag}: rewritten, same tensors; metrics kept {cfg['metrics']}",
              flush=True)
        return cfg["metrics"]
    stored = cfg["weights"]["dtype"]
    if "float32" not in (stored if isinstance(stored, list) else [stored]):
        shutil.rmtree(staging)
        raise SystemExit(f"{out} stores {stored} weights: --repack reads a float32 folder (a rounded one would "
                         f"be rounded twice); retrain it instead")
    before = osp.join(work_dir, "test_metrics.json")
    with open(before, "w") as f:
        json.dump(dict(metrics=cfg["metrics"], weights=f"float32 published folder sha256 {cfg['weights']['sha256']}"),
                  f, indent=1)
    card_metrics = _test_published(tag, config, staging, work_dir, args, log, env)
    with open(card_metrics) as f:
        save(json.load(f)["metrics"])
    with open(osp.join(args.results, "metrics", f"{tag}.json")) as f:
        old = json.load(f)
    return _finish(tag, config, args, staging, card_metrics, before, old["checkpoint"], old["train_seconds"],
                   keep_curve=True, keep_throughput=old.get("throughput"),
                   trained_with=dict(seed=old.get("seed", args.seed), threads=old.get("threads", args.threads)))


def _finish(tag, config, args, staging, card_metrics, checkpoint_metrics, ckpt, train_s, keep_curve=False,
            keep_throughput=None, trained_with=None, extra=None):
    """Measure the staged folder (slice, throughput, samples), move it into place and write the records.

    ``keep_throughput``: the throughput record of a repacked folder, kept (its float32 compute is unchanged);
    ``trained_with``: its training's seed and threads, kept; ``extra``: more entries of the record.
    """
    work_dir, log, env = _job(tag, args)
    py = sys.executable
    out = osp.join(args.out, tag)
    post = osp.join(work_dir, "post.json")
    post_cmd = [py, osp.abspath(__file__), "--post", staging, "--post-out", post]
    if parse_tag(tag).task == "gen":  # the card's grid of samples, drawn from the published folder
        post_cmd += ["--post-samples", osp.join(args.results, "samples", f"{tag}.png")]
    _run(post_cmd, log, dict(env, OMP_NUM_THREADS="1"))
    if osp.isdir(out):  # replace only once the new folder is complete
        shutil.rmtree(out)
    os.replace(staging, out)
    with open(card_metrics) as f:
        metrics = json.load(f)["metrics"]
    with open(post) as f:
        measured = json.load(f)
    if card_metrics != checkpoint_metrics:  # the stored weights were rounded: keep the float32 test next to them
        with open(checkpoint_metrics) as f:
            before = json.load(f)
        measured["checkpoint_metrics"] = dict(metrics=before.get("metrics", before),
                                              weights=before.get("weights", "float32 training checkpoint"))
    if keep_throughput:
        measured["throughput"] = keep_throughput
    measured["dtype"] = args.dtype
    rec_path = osp.join(args.results, "metrics", f"{tag}.json")
    ckpt_rec = ckpt if keep_curve else osp.join(_in_repo(args.work_root), tag, osp.basename(ckpt))
    if train_s is None:  # packaging only
        train_s = _packaged_train_seconds(rec_path, ckpt_rec, work_dir, ckpt)
    trained_with = trained_with or dict(seed=args.seed, threads=args.threads)  # the training's, not the test's
    init_path = osp.join(work_dir, "trunk_init.json")
    if osp.isfile(init_path):  # the weights the trunk started from (make_one)
        with open(init_path) as f:
            measured["trunk_init"] = json.load(f)
    resumed = _read_json(osp.join(work_dir, "resumed.json"), None)
    if resumed:  # make_one --resume: the checkpoints the training went on from
        measured["resumed"] = resumed
    record = dict(tag=tag, config=config, **trained_with, train_seconds=train_s,
                  checkpoint=ckpt_rec,
                  metrics=metrics, **measured, **(extra or {}),
                  command=f"python tools/make_weights.py --tags {tag} --seed {args.seed}{_recipe_flags(tag, args)}"
                          f"{_test_flags(args)}")
    records = [("metrics", record)] + ([] if keep_curve else [("curves", _curve(work_dir))])
    for sub, payload in records:
        os.makedirs(osp.join(args.results, sub), exist_ok=True)
        with open(osp.join(args.results, sub, f"{tag}.json"), "w") as f:
            json.dump(payload, f, indent=1 if sub == "metrics" else None)
            f.write("\n")
    mins = f"{train_s / 60:.1f} min" if train_s else "packaged"
    print(f"[{time.strftime('%H:%M:%S')}] {tag}: {metrics} ({mins})", flush=True)
    return metrics


def _in_repo(path):
    """``path`` relative to the repository when it is inside it (records name no machine's folders), else as is."""
    rel = osp.relpath(osp.abspath(path), ROOT)
    return path if rel.startswith("..") else rel


def cpu_name():
    """The CPU's model name (``/proc/cpuinfo``), for speed figures."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def post_measure(folder, samples_png=None):
    """Slice metrics and throughput of a published folder, in this process (one thread).

    For a generator, ``samples_png`` also receives a grid of its first 64 samples (seed 0).
    """
    import torch

    import zoo
    from tasks.common.evaluate import SLICE_OPTIONS, check_rebuilds, config_of, evaluate
    torch.set_num_threads(1)
    ref = f"local-dir:{osp.abspath(folder)}"
    check_rebuilds(config_of(ref), ref)  # what zoo.load gives is the model the slice and the card score
    model = zoo.load(ref).eval()
    task = model.zoo_config["task"]
    throughput = measure_throughput(model)
    if samples_png:
        from tasks.common import pictures
        pictures.save_png(pictures.sample_grid(model, n=64, seed=0), samples_png)
    sliced = evaluate(config_of(ref), model, max_samples=SLICES[task], cfg_options=SLICE_OPTIONS.get(task))
    return dict(slice=dict(num_samples=SLICES[task], metrics=sliced), throughput=throughput)


def measure_throughput(model, min_run_time=3.0):
    """One-thread inference throughput of a loaded zoo model: ``torch.utils.benchmark`` median over at least
    ``min_run_time`` seconds of a ``THROUGHPUT_BATCH`` batch (a GAN: samples drawn), with the CPU and torch version
    it was measured with."""
    import torch
    from torch.utils import benchmark

    from tasks.common.evaluate import example_input
    torch.set_num_threads(1)
    task = model.zoo_config["task"]
    batch, unit = THROUGHPUT_BATCH[task]
    with torch.no_grad():
        if task == "gen":
            stmt, glb = "m.sample(b, seed=0)", dict(m=model, b=batch)
        else:
            stmt, glb = "m(*x)", dict(m=model, x=example_input(model, task, batch))
        t = benchmark.Timer(stmt=stmt, globals=glb, num_threads=1).blocked_autorange(min_run_time=min_run_time)
    return dict(value=round(batch / t.median, 1), unit=unit, batch=batch, threads=1, median_s=t.median,
                cpu=cpu_name(), cpu_capability=torch.backends.cpu.get_cpu_capability(), torch=torch.__version__)


def remeasure_throughput(tags, args, rounds=5):
    """Measure the throughput of the published folders of ``tags`` again and replace the records' (nothing else
    changes).

    For an otherwise idle machine. All the models are loaded first, then timed in ``rounds`` rounds, each timing
    every tag once for about a second, so that the machine's drift within the run reaches every tag alike; a record
    keeps the round with the median value, ``alone: true``, the rounds' range and the date, and MODEL_CARDS.md says
    so instead of calling the figures indicative.
    """
    import zoo
    paths = {tag: (osp.join(args.out, tag), osp.join(args.results, "metrics", f"{tag}.json")) for tag in tags}
    missing = [tag for tag, (folder, rec) in paths.items()
               if not (osp.isfile(rec) and osp.isfile(osp.join(folder, "config.json")))]
    if missing:
        raise SystemExit(f"no published folder under {args.out} or record under {args.results}/metrics to measure "
                         f"again for {missing}")
    models = {tag: zoo.load(f"local-dir:{osp.abspath(folder)}").eval() for tag, (folder, _) in paths.items()}
    runs = {tag: [] for tag in tags}
    for r in range(rounds):
        for tag, model in models.items():
            runs[tag].append(measure_throughput(model, min_run_time=1.0))
        print(f"[{time.strftime('%H:%M:%S')}] round {r + 1}/{rounds}", flush=True)
    for tag, (_, path) in paths.items():
        with open(path) as f:
            rec = json.load(f)
        values = [t["value"] for t in runs[tag]]
        median = sorted(runs[tag], key=lambda t: t["value"])[(len(values) - 1) // 2]  # a measured run, lower middle
        rec["throughput"] = dict(median, alone=True, date=time.strftime("%Y-%m-%d"), rounds=len(values),
                                 range=[min(values), max(values)])
        with open(path, "w") as f:
            json.dump(rec, f, indent=1)
        print(f"{tag:32s} {median['value']:8.1f} {median['unit']}  (rounds {min(values)}-{max(values)})", flush=True)
    return 0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    p.add_argument("--mixers", nargs="+", default=list(MIXERS), choices=MIXERS)
    p.add_argument("--tags", nargs="+", default=None,
                   help="only these tags, in this order (instead of --tasks x --mixers)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--recipe", action="append", default=[], metavar="TASK=CONFIG",
                   help="train TASK from another config pattern ({m} = the mixer), e.g. seg=configs/seg/upernet_{m}-"
                        "vit-micro-p4_1xb16-2000_fashion-scenes-64x64.py: a recipe study next to the published run "
                        "(default folders under work_dirs/recipes/<config>)")
    p.add_argument("--jobs", type=int, default=2, help="trainings at once")
    p.add_argument("--threads", type=int, default=1, help="OMP threads per training")
    p.add_argument("--out", default=None, help="where the published folders go (default pretrained/; with a --seed "
                   "other than 0: work_dirs/seeds/seed<N>/pretrained, so the bundled seed-0 folders stay)")
    p.add_argument("--results", default=None, help="where metrics and curves go (default results/; with a --seed "
                   "other than 0: results/seeds/seed<N>, which MODEL_CARDS.md averages over)")
    p.add_argument("--work-root", default=None,
                   help="training runs (default work_dirs/weights; with a --seed other than 0: work_dirs/seeds/seed<N>)")
    p.add_argument("--org", default="zoo-models", help="Hub organisation recorded in config.json")
    p.add_argument("--resume", action="store_true", help="resume unfinished trainings instead of restarting")
    p.add_argument("--cfg-options", nargs="+", default=[], metavar="K=V",
                   help="passed to tools/train.py, e.g. train_cfg.max_epochs=1 for a smoke run")
    p.add_argument("--test-cfg-options", nargs="+", default=[], metavar="K=V",
                   help="passed to tools/test.py, e.g. a cheaper evaluator; the metrics' names say what was measured")
    p.add_argument("--checkpoint-test-cfg-options", nargs="+", default=[], metavar="K=V",
                   help="passed to the float32 checkpoint's tools/test.py only (its metrics are the record's "
                        "checkpoint_metrics; the card's are always the published folder's full test), e.g. "
                        "test_evaluator.0.scores=[] to skip a GAN's Inception-v3 features there (20-30 minutes of "
                        "one AVX2 core for 5,000 samples)")
    p.add_argument("--dtype", default="float16", choices=("float32", "float16", "bfloat16"),
                   help="precision of the published weights (float16 keeps the 20 folders within 25 MB; the card's "
                        "metrics are measured on the stored weights)")
    p.add_argument("--repack", action="store_true",
                   help="rewrite published folders in --dtype without their training runs (re-tested when the stored "
                        "tensors change)")
    p.add_argument("--refine", action="store_true",
                   help="after each seg tag, train its affinity refinement on the published segmentor and publish "
                        "the refined folder in its place (REFINE; needs make scenes-tune)")
    p.add_argument("--refine-only", action="store_true",
                   help="--refine on the seg folders already published (no training of the segmentors)")
    p.add_argument("--package-only", action="store_true",
                   help="rewrite the published folders and records from finished trainings (no training or test)")
    p.add_argument("--remeasure-throughput", action="store_true",
                   help="measure the published folders' one-thread throughput again, the tags interleaved over 5 "
                        "rounds (for an otherwise idle machine; nothing else in the records changes), then `make "
                        "cards`")
    p.add_argument("--post", metavar="FOLDER", help=argparse.SUPPRESS)  # internal: measure one published folder
    p.add_argument("--post-out", metavar="JSON", help=argparse.SUPPRESS)
    p.add_argument("--post-samples", metavar="PNG", help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help="print the jobs and exit")
    args = p.parse_args(argv)
    recipes = {}
    for item in args.recipe:
        task, _, pattern = item.partition("=")
        if task not in RECIPES or "{m}" not in pattern:
            p.error(f"--recipe {item!r}: expected TASK=CONFIG with TASK one of {', '.join(RECIPES)} and {{m}} for the "
                    f"mixer in CONFIG")
        recipes[task] = pattern
    args.recipe = recipes
    modes = [f"--{m.replace('_', '-')}" for m in ("repack", "package_only", "refine_only", "refine") if getattr(args, m)]
    if len(modes) > 1:
        p.error(f"{' and '.join(modes)} do different things; give one of them")
    if args.checkpoint_test_cfg_options and args.dtype == "float32":
        p.error("--checkpoint-test-cfg-options: with --dtype float32 the checkpoint's test is the card's; pass the "
                "options as --test-cfg-options if the card should be measured that way")
    # Seed 0 of the published recipes is the published run; another seed or recipe is a study next to it, never a
    # replacement of it.
    study = osp.join(ROOT, "work_dirs", "seeds", f"seed{args.seed}")
    if recipes:
        name = "+".join(osp.splitext(osp.basename(c))[0].replace("{m}", "m") for c in recipes.values())
        study = osp.join(ROOT, "work_dirs", "recipes", name + (f"_seed{args.seed}" if args.seed else ""))
    defaults = dict(out=(osp.join(ROOT, "pretrained"), osp.join(study, "pretrained")),
                    results=(osp.join(ROOT, "results"), osp.join(ROOT, "results", "seeds", f"seed{args.seed}")),
                    work_root=(osp.join(ROOT, "work_dirs", "weights"), study))
    if recipes:  # results of a recipe study stay in its folder too
        defaults["results"] = (None, osp.join(study, "results"))
    for key, (published, other_seed) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, published if args.seed == 0 and not recipes else other_seed)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.post:
        with open(args.post_out, "w") as f:
            json.dump(post_measure(args.post, args.post_samples), f, indent=1)
        return 0
    todo = jobs(args.tasks, args.mixers, args.recipe)
    if args.tags:
        known = dict(jobs(list(RECIPES), list(MIXERS), args.recipe))
        unknown = [t for t in args.tags if t not in known]
        if unknown:
            raise SystemExit(f"unknown tags {unknown}; --list shows them")
        todo = [(t, known[t]) for t in args.tags]
    if args.list:
        for tag, config in todo:
            print(f"{tag:32s} {config}")
        return 0
    if args.remeasure_throughput:  # one process, one thread, all tags interleaved: nothing else shares the machine
        return remeasure_throughput([tag for tag, _ in todo], args)
    missing = [c for _, c in todo if not osp.isfile(osp.join(ROOT, c))]
    if missing:
        raise SystemExit(f"missing configs: {missing}")
    failed = []
    # Tags that start from another one run after it: sorted behind every starting point (stable), and waiting for it
    # when it is made in this run. The pool starts jobs in submission order, so the awaited job is already running.
    todo.sort(key=lambda job: starts_from(job[0]) is not None)
    finished = {tag: threading.Event() for tag, _ in todo}
    work = (repack if args.repack else package if args.package_only else refine if args.refine_only
            else make_and_refine if args.refine else make_one)

    def run(tag, cfg):
        try:
            first = starts_from(tag)
            if work in (make_one, make_and_refine) and first in finished:
                finished[first].wait()
                if first in failed:
                    raise RuntimeError(f"it starts from {first}, which failed")
            return work(tag, cfg, args)
        except Exception:
            failed.append(tag)
            raise
        finally:
            finished[tag].set()

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run, tag, cfg): tag for tag, cfg in todo}
        for fut, tag in futures.items():
            try:
                fut.result()
            except Exception as e:  # keep going: one failed tag must not cost the others' hours (run() noted it)
                print(f"[{time.strftime('%H:%M:%S')}] {tag} FAILED: {e}", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
