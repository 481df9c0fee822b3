"""Published checkpoints: safetensors weights, ``config.json`` and a model card, on disk and on the Hugging Face Hub.

A published checkpoint is a folder (a local directory or a Hub model repo)::

    model.safetensors   weights only (``model.state_dict()``); header metadata names the model, task and args
    config.json         name, task, every constructor argument as plain JSON, num_classes + label names, input
                        spec (img size, mean/std, or num points), pretrained tag, dataset, metrics, recipe, the
                        sha256 of model.safetensors, zoo version
    README.md           the model card, generated from config.json by ``zoo.cards``

Entry points:

- ``save_pretrained(model, dir, ...)`` writes the folder (``zoo.save_pretrained`` is the public alias).
- ``load_published("hf-hub:org/name[@revision]" | "local-dir:/path", **overrides)`` rebuilds the model from
  ``config.json`` and loads the weights strictly (``zoo.load`` routes these names here).
- ``load_pretrained_tag(model, tag, cfg)`` fills a model built by the registry with the weights of a pretrained
  tag; ``cfg`` is ``zoo.registry.PRETRAINED[tag]`` = ``dict(hf_hub_id, revision, sha256, ...)``.
- ``upload_folder_one_commit(...)`` uploads a folder in a single Hub commit (used by ``tools/publish.py``).

Downloads go through ``huggingface_hub.snapshot_download(allow_patterns=...)`` and its cache (``fetch``): the files
of a published folder are fetched at one commit. ``HF_ENDPOINT``, ``HF_HUB_CACHE`` / ``HF_HOME`` and
``HF_HUB_OFFLINE`` are read when a function is called (huggingface_hub reads them once, at its import), so a process
can redirect them after importing; explicit ``endpoint=`` / ``cache_dir=`` / ``local_files_only=`` arguments win.
With ``HF_HUB_OFFLINE=1`` a cached checkpoint loads without the network.

Verification, in this order, each failure a ``zoo.CheckpointError`` naming the file and the cause: for a registry
tag, the weights' sha256 equals the pinned one (else ``ChecksumError``, before anything else of the download is
used); ``config.json`` parses and names a known model (else ``HubError``); the weights file is a valid safetensors
file (a truncated download fails here); its header names the same model, task and arguments as ``config.json``
(else ``ArchitectureMismatchError``); its sha256 equals the one recorded in ``config.json`` (else
``ChecksumError``); its keys and shapes are exactly the model's (else ``WeightsMismatchError`` listing missing,
unexpected and mis-shaped keys). Reading and the strict check are ``zoo.checkpoint``'s, shared with
``zoo.load(checkpoint=...)``.

Security: nothing is unpickled. Published weights are safetensors. (Local training checkpoints, for
``tools/publish.py``, are read by ``zoo.checkpoint`` with ``torch.load(weights_only=True)``.)
"""
import hashlib
import importlib
import inspect
import json
import math
import os
import re

from . import cards, checkpoint, registry
from .checkpoint import ArchitectureMismatchError, CheckpointError, ChecksumError, WeightsMismatchError  # noqa: F401
from .pretrained import PretrainedCfg, parse_tag, published_input

FORMAT_VERSION = 1
WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
CARD_NAME = "README.md"
PUBLISHED_FILES = (WEIGHTS_NAME, CONFIG_NAME, CARD_NAME)
# Keyword arguments of ``zoo.load`` / ``load_published`` that steer the download instead of the model.
DOWNLOAD_OPTIONS = ("cache_dir", "endpoint", "force_download", "local_files_only", "token")
# Constructor arguments that only fetch initial weights (a local path or a tag); the published weights replace
# them, so config.json records them disabled (a path from the training machine would not exist elsewhere).
INIT_ONLY_ARGS = {"pretrained": False, "checkpoint": None, "backbone_checkpoint": None, "init_cfg": None}
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class HubError(CheckpointError):
    """A published checkpoint cannot be found, downloaded or described; the message names the cause and the fix.

    Problems with the weights file itself are ``zoo.checkpoint`` errors (``ChecksumError``,
    ``ArchitectureMismatchError``, ``WeightsMismatchError``, re-exported here); all derive from ``CheckpointError``.
    """


# -- small helpers ------------------------------------------------------------------------------------------------
def sha256_file(path, chunk=1 << 20):
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _zoo_version():
    from . import __version__
    return __version__


def _env_true(name):
    return os.environ.get(name, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _plain_json(value, where):
    """Return ``value`` if it survives a JSON round trip unchanged (tuples become lists), else raise."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise HubError(f"{where} must be plain JSON (str, int, float, bool, None, list, dict): {e}") from None
    return json.loads(text)


def parse_name(name):
    """Split ``hf-hub:org/name[@revision]`` or ``local-dir:/path`` into ``(kind, target, revision)``."""
    if name.startswith("hf-hub:"):
        ref = name[len("hf-hub:"):]
        repo_id, at, revision = ref.partition("@")
        if repo_id.count("/") != 1 or not all(repo_id.split("/")) or (at and not revision):
            raise HubError(f"{name!r}: expected hf-hub:org/name or hf-hub:org/name@revision")
        return "hf-hub", repo_id, (revision or None)
    if name.startswith("local-dir:"):
        path = os.path.expanduser(name[len("local-dir:"):])
        if not path:
            raise HubError(f"{name!r}: expected local-dir:/path/to/folder")
        return "local-dir", path, None
    raise HubError(f"{name!r} is not a published checkpoint name (hf-hub:org/name[@revision] or local-dir:/path)")


# -- writing ------------------------------------------------------------------------------------------------------
def effective_args(name, task, args):
    """Every constructor argument of the task's ``build``: its defaults, overridden by ``args``.

    Recording the defaults too keeps a published model reproducible if a default changes later.
    """
    module = importlib.import_module(registry.TASKS[task].module)
    skip = {"model_name", "task", "mixer", "size", "arch"}  # from the name, not constructor choices
    out = {}
    for p in inspect.signature(module.build).parameters.values():
        if p.name in skip or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.default is inspect.Parameter.empty:
            continue
        out[p.name] = p.default
    out.update(args)
    out.update({k: v for k, v in INIT_ONLY_ARGS.items() if k in out})
    return _plain_json(out, f"the constructor arguments of {name} ({task})")


def _input_spec(task, args, input_spec):
    """The input a model expects: image size, channels, mean/std (0..1 units) for images; points for clouds;
    the latent and output size for a generator."""
    spec = {}
    if task in ("pcls", "pseg"):
        for key in ("num_points", "in_dims", "num_categories"):
            if key in args:
                spec[key] = args[key]
    else:
        if "img_size" in args:
            size = args["img_size"]
            spec["img_size"] = list(size) if isinstance(size, (list, tuple)) else [size, size]
        if task == "gen":
            spec.update({k: args[k] for k in ("z_dim", "out_chans") if k in args})
            spec.update(input_spec or {})
            return _plain_json(spec, "input_spec")
        if "in_chans" in args:
            spec["in_chans"] = args["in_chans"]
        spec["mean"], spec["std"] = None, None
    spec.update(input_spec or {})
    for key in ("mean", "std"):
        if spec.get(key) is not None:
            spec[key] = [float(v) for v in spec[key]]
            if spec.get("in_chans") and len(spec[key]) != spec["in_chans"]:
                raise HubError(f"input {key} has {len(spec[key])} values for {spec['in_chans']} input channels")
    return _plain_json(spec, "input_spec")


def _num_classes(model, args):
    """Classes (or parts) of the head: the argument, else the model's resolved default (points: 40 / 50)."""
    n = args.get("num_classes")
    n = getattr(model, "num_classes", None) if n is None else n
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def make_config(model, *, tag=None, dataset=None, metrics=None, config_name=None, label_names=None, input_spec=None,
                license="apache-2.0", extra=None):
    """Build the ``config.json`` dict of ``model`` (without the weights entry, added by ``save_pretrained``).

    Args:
        model: A model built by ``zoo.load`` / ``zoo.registry.build`` (it carries ``zoo_config``).
        tag: Pretrained tag (``{model}.{task}_{dataset}``), if any.
        dataset: A dataset key of ``zoo.cards.DATASETS`` (e.g. ``fmnist``) or a dict (``name``, ``id``, ``split``,
            ``license``, ``url``); defaults to the dataset part of ``tag``.
        metrics: ``{metric name: value}`` measured on the dataset's evaluation split.
        config_name: The training config (recipe), e.g. ``configs/cls/ff-vit-micro_fmnist.py``.
        label_names: Class names, one per class.
        input_spec: Overrides of the input spec, e.g. ``dict(mean=[0.286], std=[0.353])`` (0..1 pixel units).
        license: License of the weights (a Hub license id).
        extra: More plain-JSON fields to record (e.g. ``training``: epochs, iterations).
    """
    zc = getattr(model, "zoo_config", None)
    if not isinstance(zc, dict) or not {"name", "task", "args"} <= set(zc):
        raise HubError("the model has no zoo_config (dict(name, task, args)); build it with zoo.load or "
                       "zoo.registry.build so that config.json can rebuild it")
    name, task = zc["name"], registry.resolve_task(zc["task"])
    args = effective_args(name, task, _plain_json(zc["args"], f"zoo_config['args'] of {name}"))
    num_classes = _num_classes(model, args)
    if dataset is None and tag:
        dataset = parse_tag(tag).dataset  # ff_vit_micro.cls_fmnist -> fmnist
    dataset = cards.dataset_info(dataset) if dataset is not None else None
    if label_names is None and num_classes and dataset and len(dataset.get("label_names") or ()) == num_classes:
        label_names = dataset["label_names"]
    if dataset:
        dataset.pop("label_names", None)  # recorded once, as the model's label_names
    if label_names is not None:
        label_names = [str(n) for n in label_names]
        if num_classes is not None and len(label_names) != num_classes:
            raise HubError(f"{len(label_names)} label names for a model with num_classes={num_classes}")
    if metrics is not None:
        metrics = {str(k): _metric_value(k, v) for k, v in metrics.items()}
    info = registry.model_info(name)
    cfg = {
        "format_version": FORMAT_VERSION,
        "zoo_version": _zoo_version(),
        "name": name,
        "task": task,
        "architecture": dict(info),
        "args": args,
        "num_classes": num_classes,
        "label_names": label_names,
        "input": _input_spec(task, args, input_spec),
        "pretrained_tag": tag,
        "dataset": dataset,
        "metrics": metrics,
        "training_config": config_name,
        "license": license,
    }
    if extra:
        cfg.update(_plain_json(extra, "extra"))
    return cfg


def _metric_value(name, value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise HubError(f"metric {name!r} is not a number: {value!r}") from None
    if not math.isfinite(value):
        raise HubError(f"metric {name!r} is not finite: {value}")
    return value


def save_pretrained(model, save_dir, metrics=None, dataset=None, config_name=None, label_names=None, tag=None,
                    input_spec=None, license="apache-2.0", extra=None, dtype=None, overwrite=False):
    """Write ``model`` as a published folder: ``model.safetensors``, ``config.json`` and ``README.md``.

    Args:
        model: A zoo model (built by ``zoo.load``; its ``zoo_config`` says how to rebuild it).
        save_dir: Folder to write (created if needed). A folder written before by the zoo is written again (its
            three files replaced, as ``transformers`` does); a folder holding any of those file names without being
            one (e.g. a project's own ``README.md``) is refused, so nothing of the user's is lost, unless
            ``overwrite`` (``tools/convert.py --force``).
        metrics, dataset, config_name, label_names, tag, input_spec, license, extra: See ``make_config``.
        dtype: Store floating tensors in this precision (``torch.float16`` / ``"float16"``, ``"bfloat16"``); by
            default as the model holds them. A tensor outside that precision's range (float16 stops at 65504: e.g.
            a batch norm's running variance of large features) keeps its own precision instead of turning into
            inf. Loading casts them back to the model's precision, so the metrics given must be measured on the
            weights as stored (``tools/make_weights.py`` tests the written folder).

    Returns:
        The ``config.json`` dict that was written (its ``weights`` entry holds the file's sha256).
    """
    import torch

    cfg = make_config(model, tag=tag, dataset=dataset, metrics=metrics, config_name=config_name,
                      label_names=label_names, input_spec=input_spec, license=license, extra=extra)
    if not overwrite:
        _check_writable(save_dir)
    os.makedirs(save_dir, exist_ok=True)
    # Clone: safetensors refuses tensors that share storage, and a clone also drops any view/offset.
    cast = _float_dtype(dtype)
    state = {k: _stored(v.detach().to("cpu"), cast).contiguous().clone()
             for k, v in checkpoint.published_state_dict(model).items()}
    if not state:
        raise HubError(f"{cfg['name']} has an empty state dict; nothing to save")
    header = {"format": "pt", "zoo_name": cfg["name"], "zoo_task": cfg["task"],
              "zoo_args": json.dumps(cfg["args"], sort_keys=True), "zoo_format_version": str(FORMAT_VERSION)}
    weights = os.path.join(save_dir, WEIGHTS_NAME)
    checkpoint.write_safetensors(state, weights, metadata=header)  # same weights, same bytes
    dtypes = sorted({str(v.dtype).replace("torch.", "") for v in state.values()})
    cfg["weights"] = {"file": WEIGHTS_NAME, "sha256": sha256_file(weights), "size": os.path.getsize(weights),
                      "num_params": int(sum(v.numel() for v in state.values() if torch.is_floating_point(v))),
                      "dtype": dtypes[0] if len(dtypes) == 1 else dtypes}
    part = getattr(model, "PUBLISHED_PREFIX", None)
    if part:  # the folder holds part of the model (a GAN: its EMA generator)
        cfg["weights"]["part"] = part.rstrip(".")
    with open(os.path.join(save_dir, CONFIG_NAME), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(save_dir, CARD_NAME), "w") as f:
        f.write(cards.model_card(cfg))
    return cfg


def _check_writable(save_dir):
    """Refuse to write over files in ``save_dir`` that the zoo did not write: a folder is the zoo's when its
    ``config.json`` is an object with ``name``, ``task`` and ``args`` (of any format version or model), or, for a save
    that stopped before its ``config.json``, when its weights' header names a zoo model."""
    present = [f for f in PUBLISHED_FILES if os.path.exists(os.path.join(save_dir, f))]
    if not present:
        return
    try:
        with open(os.path.join(save_dir, CONFIG_NAME)) as f:
            cfg = json.load(f)
        if _is_zoo_config(cfg):
            return
    except (OSError, ValueError):
        pass  # no config.json, or not JSON: the weights' header may still say whose folder it is
    try:
        if "zoo_name" in checkpoint.safetensors_metadata(os.path.join(save_dir, WEIGHTS_NAME)):
            return
    except (OSError, CheckpointError):
        pass  # no weights file, or not safetensors: not the zoo's
    raise HubError(f"{save_dir} holds {', '.join(present)} but is not a folder written by the zoo (no config.json "
                   f"with name, task and args, no zoo weights); nothing was written: save into a new or empty folder")


def _stored(tensor, cast):
    """``tensor`` in the floating dtype ``cast`` (None: unchanged), unless its finite values would overflow it."""
    import torch
    if cast is None or not tensor.is_floating_point():
        return tensor
    out = tensor.to(cast)
    if torch.isfinite(out).all() or not torch.isfinite(tensor).all():
        return out
    return tensor


def _float_dtype(dtype):
    """``None`` or the floating torch dtype named by ``dtype`` (a ``torch.dtype`` or its name)."""
    import torch
    if dtype is None or isinstance(dtype, torch.dtype):
        out = dtype
    else:
        out = getattr(torch, str(dtype).replace("torch.", ""), None)
    if out is not None and (not isinstance(out, torch.dtype) or not out.is_floating_point):
        raise HubError(f"dtype {dtype!r} is not a floating-point torch dtype (float32, float16, bfloat16)")
    return out


# -- reading ------------------------------------------------------------------------------------------------------
def _is_zoo_config(cfg):
    """Whether a parsed ``config.json`` is one the zoo writes: an object with ``name``, ``task`` and ``args``."""
    return isinstance(cfg, dict) and {"name", "task", "args"} <= set(cfg)


def read_config(path, source=None):
    """Read and validate a ``config.json``; an unknown model, task or format version is a clear error."""
    source = source or path
    try:
        with open(path) as f:
            cfg = json.load(f)
    except FileNotFoundError:
        raise HubError(f"{source}: no {CONFIG_NAME}; a published folder holds {', '.join(PUBLISHED_FILES)}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise HubError(f"{source}: {CONFIG_NAME} is not valid JSON ({e}); the file is corrupted") from None
    if not _is_zoo_config(cfg):
        raise HubError(f"{source}: {CONFIG_NAME} lacks name/task/args; it was not written by zoo.save_pretrained")
    version = cfg.get("format_version", 1)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise HubError(f"{source}: {CONFIG_NAME} has format_version {version}, newer than this zoo "
                       f"({_zoo_version()}, format {FORMAT_VERSION}) reads; upgrade zoo")
    if cfg["name"] not in registry.MODELS:
        raise HubError(f"{source}: {CONFIG_NAME} names model {cfg['name']!r}, which zoo {_zoo_version()} does not "
                       f"register (zoo.list_models()); upgrade zoo or check the repo")
    cfg["task"] = registry.resolve_task(cfg["task"])
    return cfg


def _safetensors_header(path, source):
    """The header metadata of the weights file of a published folder (``zoo.checkpoint`` reads it)."""
    if not os.path.isfile(path):
        raise HubError(f"{source}: no {WEIGHTS_NAME}; a published folder holds {', '.join(PUBLISHED_FILES)}")
    return _from(source, checkpoint.safetensors_metadata, path)


def _from(source, read, path):
    """``read(path)``, its ``CheckpointError`` saying which published checkpoint the file belongs to."""
    try:
        return read(path)
    except CheckpointError as e:
        raise type(e)(f"{source}: {e}") from None


def _check_architecture(header, cfg, source):
    """``config.json`` and the weights' header must name the same model, task and arguments."""
    got = (header.get("zoo_name"), header.get("zoo_task"))
    if got[0] is None:  # weights written by another tool: the strict key check below decides
        return
    if got != (cfg["name"], cfg["task"]):
        raise ArchitectureMismatchError(
            f"{source}: {CONFIG_NAME} describes {cfg['name']} (task {cfg['task']}) but {WEIGHTS_NAME} holds weights "
            f"of {got[0]} (task {got[1]}); the folder mixes files of two checkpoints. Publish the pair written "
            f"together by zoo.save_pretrained.")
    if "zoo_args" in header:
        saved = json.loads(header["zoo_args"])
        differ = sorted(k for k in set(saved) | set(cfg["args"]) if saved.get(k) != cfg["args"].get(k))
        if differ:
            parts = ", ".join(f"{k}: config {cfg['args'].get(k)!r} vs weights {saved.get(k)!r}" for k in differ)
            raise ArchitectureMismatchError(
                f"{source}: {CONFIG_NAME} and {WEIGHTS_NAME} disagree on constructor arguments of {cfg['name']} "
                f"({parts}); the folder mixes files of two checkpoints.")


def _check_sha(path, expected, source, what, digest=None):
    digest = digest or sha256_file(path)
    if expected is not None and digest != str(expected).lower():
        raise ChecksumError(
            f"{source}: sha256 of {WEIGHTS_NAME} is {digest} but {what} says {expected}: the file is corrupted, "
            f"truncated or not the published one ({path}). It was not loaded. Download it again "
            f"(zoo.load(..., force_download=True)) or delete the cached file.")
    return digest


def load_weights(model, weights_path, cfg, source, expected_sha256=None, pin_name="the registry", digest=None):
    """Verify ``weights_path`` against ``cfg`` (and a pinned sha256), then load it strictly into ``model``."""
    header = _safetensors_header(weights_path, source)
    digest = _check_sha(weights_path, expected_sha256, source, pin_name, digest=digest)
    _check_architecture(header, cfg, source)
    _check_sha(weights_path, (cfg.get("weights") or {}).get("sha256"), source, CONFIG_NAME, digest=digest)
    state, _ = _from(source, checkpoint.read_safetensors, weights_path)
    own = model.state_dict()
    head_differs = any(k.startswith("head.") and (k not in own or k not in state or own[k].shape != state[k].shape)
                       for k in set(own) | set(state))
    hint = ("The classifier head differs: zoo.load(..., num_classes=n) loads these weights with a fresh head "
            "to fine-tune for another number of classes.") if head_differs else None
    checkpoint.load_state_dict(model, state, weights_path, f"{checkpoint.SAFETENSORS} of {source}", hint=hint)
    return model


def build_from_config(cfg, **overrides):
    """Rebuild the (randomly initialised) model a ``config.json`` describes; ``overrides`` change arguments."""
    model = registry.build(cfg["name"], task=cfg["task"], **{**cfg["args"], **overrides})
    model.pretrained_cfg = cfg  # timm-style: what the weights were trained on (input spec, labels, metrics)
    return model


# -- downloading --------------------------------------------------------------------------------------------------
def _cache_dir(cache_dir):
    """Explicit > ``HF_HUB_CACHE`` > ``HF_HOME``/hub, read now (``None``: huggingface_hub's import-time default)."""
    if cache_dir is not None:
        return os.fspath(cache_dir)
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    return None


def _endpoint(endpoint):
    """Explicit > ``HF_ENDPOINT`` read now > ``None`` (huggingface_hub's import-time value)."""
    endpoint = endpoint or os.environ.get("HF_ENDPOINT")
    return endpoint.rstrip("/") if endpoint else None


def fetch(repo_id, revision=None, files=(CONFIG_NAME, WEIGHTS_NAME), *, cache_dir=None, endpoint=None,
          force_download=False, local_files_only=None, token=None):
    """Download ``files`` of a Hub model repo at one commit through the huggingface_hub cache.

    ``huggingface_hub.snapshot_download(allow_patterns=files)`` resolves ``revision`` (default ``main``) to one
    commit and fetches every file at that commit, so the files always belong together even if the branch moves.
    Offline (``local_files_only=True`` or ``HF_HUB_OFFLINE=1``) the cached snapshot is used, or a ``HubError`` says
    it is not cached. Errors of the Hub client become ``HubError`` messages naming repo, revision and files.

    Returns:
        ``(path of each file in files..., commit)``.
    """
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import (HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                        RevisionNotFoundError)
    offline = _env_true("HF_HUB_OFFLINE") if local_files_only is None else bool(local_files_only)
    where = f"{repo_id}@{revision or 'main'} ({', '.join(files)})"
    try:
        try:
            if force_download and not offline:
                # snapshot_download answers from the cache when the Hub refuses (a private repo without a token, an
                # outage); a forced download must ask the Hub, so the repo and revision are checked first.
                HfApi(endpoint=_endpoint(endpoint), token=token).repo_info(repo_id, revision=revision)
            folder = snapshot_download(repo_id, revision=revision, allow_patterns=list(files),
                                       cache_dir=_cache_dir(cache_dir), endpoint=_endpoint(endpoint),
                                       force_download=force_download, local_files_only=offline, token=token)
        except ValueError as e:  # force_download wraps the Hub's answer: "Force download failed ..."
            if isinstance(e.__cause__, (HfHubHTTPError, LocalEntryNotFoundError)):
                raise e.__cause__ from None
            raise
    except LocalEntryNotFoundError as e:
        why = "offline mode is on (HF_HUB_OFFLINE / local_files_only)" if offline else "the Hub is unreachable"
        raise HubError(f"{where} is not in the local Hub cache ({_cache_dir(cache_dir) or 'default cache'}) and "
                       f"{why}; load it once with network access first.") from e
    except RepositoryNotFoundError as e:
        raise HubError(f"Hub repo {repo_id!r} not found (or private without a valid token: set HF_TOKEN or run "
                       f"`hf auth login`).") from e
    except RevisionNotFoundError as e:
        raise HubError(f"Hub repo {repo_id!r} has no revision {revision!r}.") from e
    except (HfHubHTTPError, OSError) as e:
        raise HubError(f"downloading {where} failed: {e}. Nothing was loaded; call again to retry.") from e
    missing = [f for f in files if not os.path.isfile(os.path.join(folder, f))]
    if missing and offline:
        raise HubError(f"{where}: {', '.join(missing)} not in the local Hub cache ({folder}) and offline mode is on "
                       f"(HF_HUB_OFFLINE / local_files_only); load it once with network access first.")
    if missing:
        raise HubError(f"Hub repo {repo_id!r} at {revision or 'main'} has no {', '.join(missing)}; a published "
                       f"folder holds {', '.join(PUBLISHED_FILES)}.")
    return (*(os.path.join(folder, f) for f in files), os.path.basename(folder))


def _split_options(kwargs):
    hub = {k: kwargs.pop(k) for k in DOWNLOAD_OPTIONS if k in kwargs}
    return hub, kwargs


def load_published(name, **kwargs):
    """Load a published checkpoint: ``hf-hub:org/name[@revision]`` or ``local-dir:/path``.

    Args:
        name: The checkpoint reference.
        **kwargs: Download options (``cache_dir``, ``endpoint``, ``force_download``, ``local_files_only``,
            ``token``); everything else overrides a constructor argument of ``config.json`` (the weights must
            still fit, e.g. ``drop_path_rate=0.1`` for fine-tuning).

    Returns:
        The model with its weights (``model.pretrained_cfg`` holds ``config.json``).
    """
    hub_kwargs, overrides = _split_options(dict(kwargs))
    kind, target, revision = parse_name(name)
    if kind == "local-dir":
        if hub_kwargs:
            raise HubError(f"{', '.join(hub_kwargs)} apply to hf-hub: names, not to {name!r}")
        if not os.path.isdir(target):
            raise HubError(f"{name!r}: {target} is not a folder")
        config_path, weights_path, source = (os.path.join(target, CONFIG_NAME), os.path.join(target, WEIGHTS_NAME),
                                             name)
    else:
        config_path, weights_path, commit = fetch(target, revision, **hub_kwargs)
        source = f"hf-hub:{target}@{commit}"
    cfg = read_config(config_path, source)
    model = build_from_config(cfg, **overrides)
    load_weights(model, weights_path, cfg, source)
    if cfg.get("pretrained_tag"):  # the same description as a registry tag gives (timm's pretrained_cfg)
        model.pretrained_cfg = {**cfg, **PretrainedCfg.from_published(cfg, revision=revision).to_dict()}
    else:  # a folder of one's own: its input still in the flat fields zoo.preprocess reads (its mean/std)
        model.pretrained_cfg = {**cfg, **{k: v for k, v in published_input(cfg).items() if v is not None}}
    return model


def _cached_only(repo_id, revision, files, hub_kwargs):
    """The Hub cache's copies of ``files`` at one commit (``fetch``'s answer), or ``None``; never uses the network."""
    opts = {k: v for k, v in hub_kwargs.items() if k in ("cache_dir", "endpoint", "token")}
    try:
        return fetch(repo_id, revision, files, local_files_only=True, **opts)
    except HubError:
        return None


def resolve_pretrained_files(entry, **hub_kwargs):
    """Where the files of a pretrained entry are: ``(config_path, weights_path, source)``.

    Order: the source checkout's ``pretrained/<tag>/`` folder, then the Hub cache, then a download from the Hub
    (not when offline). ``force_download=True`` skips the first two. The caller checks the sha256 on every path.
    """
    tag = entry.tag
    force = hub_kwargs.get("force_download", False)
    folder = entry.bundled_dir
    if not force and os.path.isfile(os.path.join(folder, WEIGHTS_NAME)):
        return os.path.join(folder, CONFIG_NAME), os.path.join(folder, WEIGHTS_NAME), f"{tag} ({folder})"
    files = (CONFIG_NAME, entry.file)
    if not force:
        cached = _cached_only(entry.hf_hub_id, entry.revision, files, hub_kwargs)
        if cached:
            return cached[0], cached[1], f"{tag} (Hub cache of {entry.hf_hub_id})"
    try:
        config_path, weights_path, commit = fetch(entry.hf_hub_id, entry.revision, files, **hub_kwargs)
    except HubError as e:
        raise HubError(f"{tag}: not in this checkout ({folder}) nor in the Hub cache, and the download failed: {e}"
                       + ("" if entry.revision else " The checkpoint is not published on the Hub yet; it ships "
                          "with the source checkout (git clone the zoo repository).")) from None
    return config_path, weights_path, f"{tag} (hf-hub:{entry.hf_hub_id}@{commit})"


def load_pretrained_tag(model, entry, **hub_kwargs):
    """Fill ``model`` (built by the registry for the entry's model and task) with the weights of ``entry``.

    Args:
        model: The model ``zoo.load`` built for the tag's name and task.
        entry: A ``zoo.pretrained.PretrainedCfg``: the checkout folder, Hub repo (``hf_hub_id``, pinned
            ``revision``) and ``sha256`` of the weights, verified before anything else of the files is used.
        **hub_kwargs: Download options (see ``fetch``).

    Returns:
        The model, weights loaded; ``model.pretrained_cfg`` is ``entry.to_dict()`` completed by its ``config.json``.
        (Upstream entries, with a ``converter``, load through ``zoo.upstream.load_upstream``.)
    """
    if entry.converter:
        raise HubError(f"{entry.tag} holds upstream weights (converter {entry.converter!r}); they load through "
                       f"zoo.upstream.load_upstream, not from a published folder")
    if not entry.sha256 or not _SHA256_RE.match(entry.sha256):
        raise HubError(f"registry entry of {entry.tag!r} needs the 64-digit sha256 of its weights "
                       f"(zoo.registry.PRETRAINED), got {entry.sha256!r}")
    config_path, weights_path, source = resolve_pretrained_files(entry, **hub_kwargs)
    digest = _check_sha(weights_path, entry.sha256, source, f"zoo.registry.PRETRAINED[{entry.tag!r}]")
    pub = read_config(config_path, source)
    zc = getattr(model, "zoo_config", {})
    if (pub["name"], pub["task"]) != (zc.get("name"), zc.get("task")):
        raise ArchitectureMismatchError(
            f"{source}: its {CONFIG_NAME} describes {pub['name']} (task {pub['task']}) but the tag is for "
            f"{zc.get('name')} (task {zc.get('task')}); the registry entry points at the wrong files.")
    load_weights(model, weights_path, pub, source, digest=digest)
    # The entry's fields, completed by what the loaded config.json says (labels, input spec, metrics).
    published = PretrainedCfg.from_published({**pub, "pretrained_tag": entry.tag}).to_dict()
    model.pretrained_cfg = {**published, **{k: v for k, v in entry.to_dict().items() if v not in (None, {}, [], "")}}
    return model


# -- uploading ----------------------------------------------------------------------------------------------------
def upload_folder_one_commit(folder, repo_id, *, revision=None, private=False, commit_message=None, endpoint=None,
                             files=PUBLISHED_FILES):
    """Upload ``files`` of ``folder`` to a Hub model repo in ONE commit; returns ``(commit_oid, commit_url)``.

    The repo is created if missing (``private`` applies then), the branch ``revision`` too. All files go in one
    ``create_commit``: if the commit fails, the repo keeps its previous state. The token is the one
    huggingface_hub finds itself (``HF_TOKEN`` or ``hf auth login``); it is never an argument and never printed.
    """
    from huggingface_hub import CommitOperationAdd, HfApi, get_token
    if get_token() is None:
        raise HubError("no Hugging Face token: set HF_TOKEN in the environment or run `hf auth login` "
                       "(a token is never passed on the command line)")
    api = HfApi(endpoint=_endpoint(endpoint))
    paths = [os.path.join(folder, f) for f in files]
    for p in paths:
        if not os.path.isfile(p):
            raise HubError(f"{p} is missing; write the folder with zoo.save_pretrained first")
    api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    if revision and revision != "main":
        api.create_branch(repo_id, branch=revision, exist_ok=True, repo_type="model")
    ops = [CommitOperationAdd(path_in_repo=f, path_or_fileobj=p) for f, p in zip(files, paths)]
    info = api.create_commit(repo_id, operations=ops, revision=revision, repo_type="model",
                             commit_message=commit_message or f"Publish {repo_id}")
    return info.oid, info.commit_url
