"""Train the bundled checkpoints from their configs, score them, and write them in the published layout.

``make weights`` runs this. For every tag ``{mixer}_vit_micro.{task}_{dataset}`` it:

1. trains the tag's config with ``tools/train.py`` (seed fixed, deterministic algorithms, one thread per job),
   into ``work_dirs/weights/<tag>/``;
2. scores the last checkpoint with ``tools/test.py --json-out`` on the task's evaluation split (no checkpoint
   selection: the last one is published, whatever the curve did);
3. writes ``pretrained/<tag>/`` with ``tools/publish.py --no-upload`` (``model.safetensors``, ``config.json``,
   the ``README.md`` card), i.e. exactly the folder that an upload would send;
4. keeps the validation curve (mmengine's ``scalars.json``) as ``results/curves/<tag>.json`` and the test metrics
   as ``results/metrics/<tag>.json``.

Jobs run ``--jobs`` at a time (default 2, one per core of the machines this was made on); micro models use one
thread each better than two threads for one model. Examples::

    python tools/make_weights.py                          # all 20 tags
    python tools/make_weights.py --tasks cls --mixers ea  # one tag
    python tools/make_weights.py --list                   # the jobs and their configs

The data must exist first: ``make scenes shapes`` (Fashion-MNIST comes from the Debian package).
"""
import argparse
import glob
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
MIXERS = ("sa", "ea", "effa", "ff")
# task -> (dataset key of the tag, config path pattern). One recipe per task, the same for all four mixers.
RECIPES = {
    "cls": ("fmnist", "configs/cls/{m}-vit-micro-p4_1xb128-10e_fmnist-28.py"),
    "seg": ("scenes", "configs/seg/upernet_{m}-vit-micro_1xb16-3k_fashion-scenes-64x64.py"),
    "pcls": ("shapes", "configs/pcls/pct_{m}-vit-micro_1xb16-15e_shapes-256.py"),
    "pseg": ("shapes", "configs/pseg/pct_{m}-vit-micro_1xb16-30e_shapes-part-256.py"),
    "gen": ("fmnist", "configs/gen/sagan_{m}-vit-micro_1xb32-6k_fmnist-32x32.py"),
}


def jobs(tasks, mixers):
    """``[(tag, config)]`` in the order given."""
    return [(f"{m}_vit_micro.{t}_{RECIPES[t][0]}", RECIPES[t][1].format(m=m)) for t in tasks for m in mixers]


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
    """The newest run's ``vis_data/scalars.json`` under ``work_dir`` (one JSON record per logged step)."""
    runs = sorted(glob.glob(osp.join(work_dir, "2*", "vis_data", "scalars.json")))
    if not runs:
        raise FileNotFoundError(f"no vis_data/scalars.json under {work_dir}")
    with open(runs[-1]) as f:
        return [json.loads(line) for line in f if line.strip()]


def make_one(tag, config, args):
    """Train, test and package one tag; returns its test metrics."""
    work_dir = osp.join(args.work_root, tag)
    if osp.isdir(work_dir) and not args.resume:
        shutil.rmtree(work_dir)
    os.makedirs(work_dir, exist_ok=True)
    log = osp.join(work_dir, "make_weights.log")
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), PYTHONHASHSEED="0")
    py = sys.executable
    t0 = time.time()
    train = [py, "tools/train.py", config, "--work-dir", work_dir, "--cfg-options",
             f"randomness.seed={args.seed}", "randomness.deterministic=True", *args.cfg_options]
    if args.resume:
        train.append("--resume")
    _run(train, log, env)
    train_s = time.time() - t0
    ckpt = _last_checkpoint(work_dir)
    metrics_path = osp.join(work_dir, "test_metrics.json")
    _run([py, "tools/test.py", config, ckpt, "--work-dir", osp.join(work_dir, "test"), "--json-out", metrics_path],
         log, env)
    out = osp.join(args.out, tag)
    staging = out + ".new"
    shutil.rmtree(staging, ignore_errors=True)
    _run([py, "tools/publish.py", "--config", config, "--checkpoint", ckpt, "--tag", tag, "--metrics", metrics_path,
          "--repo-id", f"{args.org}/{tag}", "--out", staging, "--no-upload"], log, env)
    if osp.isdir(out):  # replace only once the new folder is complete
        shutil.rmtree(out)
    os.replace(staging, out)
    with open(metrics_path) as f:
        metrics = json.load(f)["metrics"]
    record = dict(tag=tag, config=config, seed=args.seed, threads=args.threads, train_seconds=round(train_s, 1),
                  checkpoint=osp.relpath(ckpt, ROOT), metrics=metrics,
                  command=f"python tools/make_weights.py --tasks {tag.split('.')[1].split('_')[0]} "
                          f"--mixers {tag.split('_')[0]} --seed {args.seed}")
    for sub, payload in (("metrics", record), ("curves", _curve(work_dir))):
        os.makedirs(osp.join(args.results, sub), exist_ok=True)
        with open(osp.join(args.results, sub, f"{tag}.json"), "w") as f:
            json.dump(payload, f, indent=1 if sub == "metrics" else None)
            f.write("\n")
    print(f"[{time.strftime('%H:%M:%S')}] {tag}: {metrics} ({train_s / 60:.1f} min)", flush=True)
    return metrics


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    p.add_argument("--mixers", nargs="+", default=list(MIXERS), choices=MIXERS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="trainings at once")
    p.add_argument("--threads", type=int, default=1, help="OMP threads per training")
    p.add_argument("--out", default=osp.join(ROOT, "pretrained"), help="where the published folders go")
    p.add_argument("--results", default=osp.join(ROOT, "results"), help="where metrics and curves go")
    p.add_argument("--work-root", default=osp.join(ROOT, "work_dirs", "weights"))
    p.add_argument("--org", default="zoo-models", help="Hub organisation recorded in config.json")
    p.add_argument("--resume", action="store_true", help="resume unfinished trainings instead of restarting")
    p.add_argument("--cfg-options", nargs="+", default=[], metavar="K=V",
                   help="passed to tools/train.py, e.g. train_cfg.max_epochs=1 for a smoke run")
    p.add_argument("--list", action="store_true", help="print the jobs and exit")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    todo = jobs(args.tasks, args.mixers)
    if args.list:
        for tag, config in todo:
            print(f"{tag:32s} {config}")
        return 0
    missing = [c for _, c in todo if not osp.isfile(osp.join(ROOT, c))]
    if missing:
        raise SystemExit(f"missing configs: {missing}")
    failed = []
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(make_one, tag, cfg, args): tag for tag, cfg in todo}
        for fut, tag in futures.items():
            try:
                fut.result()
            except Exception as e:  # keep going: one failed tag must not cost the others' hours
                failed.append(tag)
                print(f"[{time.strftime('%H:%M:%S')}] {tag} FAILED: {e}", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
