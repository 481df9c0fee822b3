"""Publish a trained checkpoint to the Hugging Face Hub: safetensors + config.json + model card, in one commit.

    python tools/publish.py --config CFG --checkpoint CKPT --repo-id org/name --metrics results.json \
        [--tag ff_vit_micro.cls_fmnist | --dataset fmnist] [--revision main] [--private] [--out DIR] [--no-upload]

Steps: read the metrics (refuses to publish without measured metrics), build the model from the mmengine config,
read the training checkpoint and keep the model's weights only (optimizer, message hub, schedulers and EMA
copies are dropped), write the published folder with ``zoo.save_pretrained``, check that ``zoo.load`` of that
folder gives the checkpoint's model (same outputs on a fixed input with the weights as stored: a constructor choice
that ``config.json`` missed would otherwise load silently as another model), upload its three files in ONE
commit (a failed upload leaves the repo as it was), write ``results/<tag>.json`` and print the
command that registers it (``make cards``).

The model comes from the config as follows. Preferred: the config's ``model`` dict builds (after its
``custom_imports``) an mmengine model with a ``zoo_model`` property returning the zoo ``nn.Module``; the
checkpoint's ``state_dict`` is loaded into that mmengine model strictly, and ``zoo_model``'s weights are
published. Fallback contract, for a config whose model cannot be built here: ``cfg.model`` carries ``name``
(a registered zoo name), ``task`` and ``args`` (the zoo constructor arguments); the zoo model is built from them
and its weights are taken from the checkpoint under the one key prefix that fits them exactly.

The checkpoint is a local file written by our training runs: a safetensors file, a plain state dict, or an
mmengine checkpoint, read by ``zoo.checkpoint.read`` (``torch.load(weights_only=True)`` with the zoo's one allowlist,
which admits what mmengine writes into a checkpoint and nothing that runs code); its weights are checked strictly by
``zoo.checkpoint.check_state_dict``, and every failure is a ``zoo.CheckpointError`` naming the file.

``--metrics`` is a JSON file: either ``{"metrics": {name: value}, ...}`` or a flat ``{name: value}`` (what
``tools/test.py`` reports); the last JSON line of an mmengine log file also works.

The token is the one huggingface_hub finds (``HF_TOKEN`` or ``hf auth login``); there is no token option, and
the token is never printed or logged. ``HF_ENDPOINT`` (or ``--endpoint``) selects another Hub, e.g. the test
server of ``tests/hub_server.py``.
"""
import argparse
import json
import logging
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from zoo import checkpoint, hub, registry  # noqa: E402

log = logging.getLogger("zoo.publish")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", help="mmengine config the checkpoint was trained with")
    p.add_argument("--checkpoint", help="training checkpoint (.pth from mmengine, or .safetensors)")
    p.add_argument("--pretrained", metavar="TAG", help="republish a registered upstream tag (e.g. "
                   "sa_vit_base.seg_ade20k) in the zoo layout: converted weights, its licence, citation and reported "
                   "metrics (instead of --config/--checkpoint/--metrics)")
    p.add_argument("--repo-id", required=True, help="Hub model repo, org/name (zoo-models/{tag})")
    p.add_argument("--revision", default=None, help="branch to commit to (created if missing; default main)")
    p.add_argument("--private", action="store_true", help="create the repo private (if it does not exist)")
    p.add_argument("--metrics", default=None, help="JSON file of measured metrics (required)")
    p.add_argument("--tag", default=None, help="pretrained tag {model}.{task}_{dataset} (default from --dataset)")
    p.add_argument("--dataset", default=None, help="dataset key (zoo.cards.DATASETS, e.g. fmnist) or a name")
    p.add_argument("--split", default=None, help="evaluation split of the metrics (default: the dataset's)")
    p.add_argument("--label-names", default=None, help="comma-separated class names, or a file with one per line")
    p.add_argument("--mean", default=None, help="input mean, comma-separated, 0..1 pixel units (default: config)")
    p.add_argument("--std", default=None, help="input std, comma-separated, 0..1 pixel units (default: config)")
    p.add_argument("--license", default="apache-2.0", help="license of the weights (Hub license id)")
    p.add_argument("--dtype", default=None, choices=("float32", "float16", "bfloat16"),
                   help="store the weights in this precision (default: as trained); --metrics must then be measured "
                        "on the stored weights, as tools/make_weights.py does")
    p.add_argument("--out", default=None, help="write the published folder here (default: a temporary folder)")
    p.add_argument("--no-upload", action="store_true", help="only write the folder (--out), do not upload")
    p.add_argument("--results-dir", default=os.path.join(ROOT, "results"), help="where results/<tag>.json goes")
    p.add_argument("--endpoint", default=None, help="Hub endpoint (default HF_ENDPOINT or huggingface.co)")
    p.add_argument("--verbose", action="store_true", help="debug logging")
    return p.parse_args(argv)


def read_metrics(path):
    """``(metrics, extra)`` from a metrics JSON file; anything without a numeric metric is refused."""
    if not path:
        raise SystemExit("refusing to publish without measured metrics: pass --metrics results.json (the "
                         "evaluation of this checkpoint, e.g. from tools/test.py)")
    if not os.path.isfile(path):
        raise SystemExit(f"--metrics {path}: no such file")
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:  # an mmengine scalars log: one JSON object per line, the last one the test
        lines = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
        data = lines[-1] if lines else None
    if not isinstance(data, dict):
        raise SystemExit(f"--metrics {path}: expected a JSON object of metric values")
    metrics = data.get("metrics", data)
    skip = {"step", "epoch", "iter", "time", "data_time", "lr"}
    numeric = {k: v for k, v in metrics.items() if k not in skip and isinstance(v, (int, float))
               and not isinstance(v, bool)}
    if not numeric:
        raise SystemExit(f"refusing to publish: {path} holds no measured metric values ({', '.join(metrics)})")
    extra = {k: v for k, v in data.items() if k != "metrics"} if "metrics" in data else {}
    return numeric, extra


def model_from_config(cfg, ckpt):
    """``(zoo model with the weights of ``ckpt``, a ``zoo.checkpoint.Checkpoint``, how it was found)``; see the
    module docstring."""
    source = ckpt.path
    model_cfg = cfg.get("model")
    if model_cfg is None:
        raise SystemExit(f"{source}: the config has no `model` dict")
    wrapper_error = None
    if model_cfg.get("type") is not None:
        try:
            from mmengine.registry import MODELS, init_default_scope
            from mmengine.utils import import_modules_from_strings
            if cfg.get("custom_imports"):
                import_modules_from_strings(**cfg["custom_imports"])
            if cfg.get("default_scope"):
                init_default_scope(cfg["default_scope"])
            wrapper = MODELS.build(model_cfg)
            if not hasattr(wrapper, "zoo_model"):
                raise AttributeError(f"{type(wrapper).__name__} has no `zoo_model` property")
            checkpoint.load_state_dict(wrapper, dict(ckpt.state), source, ckpt.format,
                                       target=f"the config's model ({type(wrapper).__name__})")
            model = wrapper.zoo_model
            if not hasattr(model, "zoo_config"):
                raise SystemExit(f"{type(wrapper).__name__}.zoo_model has no zoo_config; build it with zoo.load")
            return model, f"{type(wrapper).__name__}.zoo_model"
        except (ImportError, KeyError, AttributeError, TypeError) as e:
            wrapper_error = e
    if not model_cfg.get("name"):
        raise SystemExit(f"cannot get the zoo model from the config: building `model` failed ({wrapper_error}) and "
                         f"`model` has no `name`/`task`/`args` (the fallback contract, see tools/publish.py)")
    model = registry.build(model_cfg["name"], task=model_cfg.get("task", "cls"), **dict(model_cfg.get("args") or {}))
    state = checkpoint.model_state(ckpt, model)  # the zoo model's part of a training wrapper's weights
    checkpoint.load_state_dict(model, state, source, ckpt.format)
    how = "cfg.model name/task/args" + (f" (building the mmengine model failed: {wrapper_error})"
                                        if wrapper_error else "")
    return model, how


def _normalisation_sources(cfg):
    """Where a config states mean/std (0..255 units, mmengine's convention), most specific first."""
    yield (cfg.get("model") or {}).get("data_preprocessor") or {}
    yield cfg.get("data_preprocessor") or {}
    dataset = (cfg.get("test_dataloader") or {}).get("dataset") or {}
    for step in list(dataset.get("pipeline") or []) + list(cfg.get("test_pipeline") or []):
        if isinstance(step, dict):
            yield step
    yield cfg


def input_spec_from(cfg, args, model):
    """Mean/std in 0..1 units: ``--mean/--std``, else the config's (data preprocessor, test pipeline, top level)."""
    spec = {}
    for key in ("mean", "std"):
        given = getattr(args, key)
        if given:
            spec[key] = [float(v) for v in given.split(",")]
            continue
        for source in _normalisation_sources(cfg):
            if source.get(key) is not None:
                spec[key] = [float(v) / 255.0 for v in source[key]]  # the configs state 0..255 pixel units
                break
    return spec


def label_names_from(args, meta):
    if args.label_names:
        if os.path.isfile(args.label_names):
            with open(args.label_names) as f:
                return [line.strip() for line in f if line.strip()]
        return [n.strip() for n in args.label_names.split(",")]
    dataset_meta = (meta.get("dataset_meta") or {}) if isinstance(meta, dict) else {}
    parts = dataset_meta.get("parts")
    if parts:  # part segmentation: the labels are the global part ids, named "<category>/<part index>"
        names = {pid: f"{cat}/{i}" for cat, ids in zip(dataset_meta["classes"], parts) for i, pid in enumerate(ids)}
        return [names.get(pid, f"part_{pid}") for pid in range(max(names) + 1)] if names else None
    classes = dataset_meta.get("classes")
    return list(classes) if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes) else None


def republish(args):
    """``--pretrained TAG``: the converted upstream model as a zoo folder (and Hub repo), with the upstream licence,
    citation and source in its card and the metrics marked as reported upstream (nothing is measured here)."""
    import zoo
    from zoo import cards
    try:
        entry = registry.pretrained_cfg(args.pretrained)
    except (KeyError, ValueError) as e:
        raise SystemExit(f"tools/publish.py: error: {e}") from None
    if args.dtype:
        raise SystemExit("tools/publish.py: error: --pretrained keeps the upstream weights as converted (its reported "
                         "metrics were measured on them); drop --dtype")
    if not entry.converter:
        raise SystemExit(f"tools/publish.py: error: {entry.tag} is not an upstream checkpoint (it is published "
                         f"already, as {entry.hf_hub_id}); --pretrained republishes converted upstream weights")
    try:
        model = zoo.load(entry.tag)  # downloaded, sha256-checked and converted once (zoo.upstream)
    except checkpoint.CheckpointError as e:
        raise SystemExit(f"tools/publish.py: error: {e}") from None
    upstream = dict(source=entry.source, url=entry.url or f"https://huggingface.co/{entry.hf_hub_id}",
                    metrics_source=entry.metrics_source, citation=entry.citation)
    dataset = cards.dataset_info(entry.dataset) if entry.dataset else None
    spec = dict(img_size=list(entry.input_size[1:]), in_chans=entry.input_size[0]) if entry.input_size else None
    if spec and entry.mean is not None:
        spec.update(mean=list(entry.mean), std=list(entry.std))
    out = args.out or tempfile.mkdtemp(prefix="zoo-publish-")
    written = hub.save_pretrained(model, out, metrics=dict(entry.metrics or {}), dataset=dataset, tag=entry.tag,
                                  label_names=list(entry.label_names) if entry.label_names else None,
                                  input_spec=spec, license=entry.license or args.license,
                                  extra={"hf_hub_id": args.repo_id, "upstream": upstream})
    log.info("wrote %s (model.safetensors sha256 %s)", out, written["weights"]["sha256"])
    return out, written, entry.tag, model.zoo_config["name"], model.zoo_config["task"]


def trunk_init(cfg):
    """``{"trunk_init": {"source": ..., "skip": [...]}}`` when the config starts its trunk from other weights (an
    mmseg-style ``backbone.init_cfg``): the pretrained tag or file it names, and the key patterns it leaves at their
    fresh initialisation (``skip``, present only when some are). Empty otherwise (trained from scratch).
    ``tools/make_weights.py`` records the sha256 of the weights a run actually started from."""
    init = ((cfg.get("model") or {}).get("backbone") or {}).get("init_cfg") or {}
    source = init.get("checkpoint") if isinstance(init, dict) else None
    if not source:
        return {}
    out = {"source": str(source)}
    if init.get("skip"):
        out["skip"] = [str(k) for k in init["skip"]]
    return {"trunk_init": out}


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(name)s: %(message)s")
    if args.pretrained:
        if args.config or args.checkpoint or args.metrics:
            raise SystemExit("tools/publish.py: error: --pretrained TAG takes its weights and metrics from the "
                             "registry; drop --config/--checkpoint/--metrics")
        out, written, tag, name, task = republish(args)
        config_name = f"--pretrained {tag}"
        return _upload(args, out, written, tag, name, task, config_name)
    if not (args.config and args.checkpoint):
        raise SystemExit("tools/publish.py: error: give --config and --checkpoint (or --pretrained TAG)")
    metrics, metrics_extra = read_metrics(args.metrics)
    from mmengine.config import Config
    cfg = Config.fromfile(args.config)
    try:
        ckpt = checkpoint.read(args.checkpoint)
        model, how = model_from_config(cfg, ckpt)
    except (checkpoint.CheckpointError, FileNotFoundError) as e:
        raise SystemExit(f"tools/publish.py: error: {e}") from None
    meta = ckpt.meta
    name, task = model.zoo_config["name"], registry.resolve_task(model.zoo_config["task"])
    log.info("model %s (%s) from %s; %d tensors kept, training state dropped", name, task, how,
             len(model.state_dict()))

    tag = args.tag or (f"{name}.{task}_{args.dataset}" if args.dataset else None)
    if tag is None:
        raise SystemExit("pass --tag {model}.{task}_{dataset} or --dataset KEY")
    from zoo.pretrained import parse_tag
    try:
        parsed = parse_tag(tag)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if (parsed.model, parsed.task) != (name, task):
        raise SystemExit(f"tag {tag!r} does not match the model {name} and task {task}: expected {name}.{task}_<data>")
    tag = str(parsed)
    dataset = args.dataset or parsed.dataset
    from zoo import cards
    dataset = cards.dataset_info(dataset)
    if args.split or metrics_extra.get("split"):
        dataset["split"] = args.split or metrics_extra["split"]

    training = {k: meta[k] for k in ("epoch", "iter") if isinstance(meta.get(k), int)}
    training.update(trunk_init(cfg))
    extra = {"hf_hub_id": args.repo_id, "training": training} if training else {"hf_hub_id": args.repo_id}
    out = args.out or tempfile.mkdtemp(prefix="zoo-publish-")
    config_name = os.path.relpath(os.path.abspath(args.config), ROOT)
    if config_name.startswith(".."):
        config_name = os.path.basename(args.config)
    written = hub.save_pretrained(model, out, metrics=metrics, dataset=dataset, config_name=config_name,
                                  label_names=label_names_from(args, meta), tag=tag,
                                  input_spec=input_spec_from(cfg, args, model), license=args.license, extra=extra,
                                  dtype=args.dtype)
    log.info("wrote %s (model.safetensors sha256 %s)", out, written["weights"]["sha256"])
    _check_rebuilds(out, model, config_name)
    return _upload(args, out, written, tag, name, task, f"--config {config_name}")


def _check_rebuilds(out, model, config_name):
    """The written folder must load (``zoo.load``) as the model the checkpoint holds: a constructor choice of the
    config that ``config.json`` does not record (and no weight shows) would load silently as another model."""
    import copy

    import zoo
    from tasks.common.evaluate import same_model
    try:
        loaded = zoo.load(f"local-dir:{os.path.abspath(out)}")
        built = copy.deepcopy(model)
        built.load_state_dict(loaded.state_dict())  # the weights as stored (--dtype may have rounded them)
        same_model(loaded, built, out, f"the model of {config_name}",
                   hint="The model has a constructor choice its zoo_config does not record; nothing was uploaded.")
    except ValueError as e:
        raise SystemExit(f"tools/publish.py: error: {e}") from None


def _upload(args, out, written, tag, name, task, source_args):
    """Upload the written folder in one commit and record it in ``results/<tag>.json`` (unless --no-upload)."""
    if args.no_upload:
        print(f"published folder written to {out} (not uploaded)")
        return 0

    oid, url = hub.upload_folder_one_commit(out, args.repo_id, revision=args.revision, private=args.private,
                                            endpoint=args.endpoint,
                                            commit_message=f"Publish {tag} ({name}, {task})")
    record = dict(written, hf_hub_id=args.repo_id, revision=oid,
                  command=f"tools/publish.py {source_args} --repo-id {args.repo_id}")
    os.makedirs(args.results_dir, exist_ok=True)
    result_path = os.path.join(args.results_dir, f"{tag}.json")
    with open(result_path, "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")
    print(f"published {tag} to {args.repo_id} in one commit {oid} ({url})")
    print(f"wrote {result_path}; run `make cards` to register {tag} (zoo/pretrained.json) and update MODEL_CARDS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
