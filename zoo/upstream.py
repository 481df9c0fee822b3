"""Upstream checkpoints (trained and published by their authors): downloaded once, converted once, cached as safetensors.

A pretrained entry is upstream when it names a ``converter`` (a layout of ``zoo.convert.CONVERTERS``). Its source
is a plain ``url`` (a GitHub release, ``download.openmmlab.com``, a file committed to a GitHub repository), or else
the file ``file`` of the Hub repo ``hf_hub_id`` at ``revision`` (timm's DeiT repos), fetched through
``huggingface_hub`` and its cache (``zoo.hub.fetch``).

Plain URLs are downloaded into the folder ``zoo`` next to the Hub cache (``~/.cache/huggingface/zoo`` by default;
the sibling of ``HF_HUB_CACHE``, or of an explicit ``cache_dir``, which names a Hub cache as for ``zoo.hub``)::

    zoo/downloads/<sha256(url)[:16]>/<file name>         the upstream file as published
    zoo/converted/<tag>/<variant>/model.safetensors       the zoo-layout weights of the model the tag builds
    zoo/converted/<tag>/<variant>/source.json             where they come from, and their own sha256

``<variant>`` is a digest of the target model's tensor names and shapes (another ``img_size`` resamples the position
embedding, so it is another conversion). A file name in torch.hub's ``name-<sha256 prefix>.ext`` convention (e.g.
``...-fb9a5dfb.pth``), or the entry's ``sha256``, is checked against the download before anything reads it. A
``.pth`` is only ever read with ``torch.load(weights_only=True)`` (``zoo.convert``); once converted, later loads --
offline ones (``HF_HUB_OFFLINE=1`` or ``local_files_only=True``) included -- read the safetensors file only, after
checking its sha256 against ``source.json``, and unpickle nothing.
"""
import hashlib
import http.client
import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request

from . import convert, hub
from .checkpoint import CheckpointError
from .hub import sha256_file

# torch.hub's convention: the part of the file name after the last "-" and before the extension is a sha256 prefix
# (at least 8 hex digits here, so that words such as "-base." do not read as one).
HASH_IN_NAME = re.compile(r"-([0-9a-f]{8,64})\.")
CHUNK = 1 << 20
FORMAT = 1  # version of the converted-cache layout; bump to invalidate every cached conversion


class UpstreamError(CheckpointError):
    """An upstream file could not be fetched, or is not the file the entry names (URL, cache path and cause)."""


# -- small helpers ------------------------------------------------------------------------------------------------
def _field(entry, name, default=None):
    """A field of a ``PretrainedCfg`` or of a plain dict (tests and tools pass either)."""
    value = entry.get(name, default) if isinstance(entry, dict) else getattr(entry, name, default)
    return default if value is None else value


def state_dict_key(entry):
    """Entry of the upstream checkpoint dict that holds the weights to use (e.g. ``state_dict_ema``), or None."""
    return _field(entry, "state_dict_key") or (_field(entry, "extra", {}) or {}).get("state_dict_key")


def _offline(local_files_only):
    if local_files_only is not None:
        return bool(local_files_only)
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def hub_cache_dir(cache_dir=None):
    """The Hub cache: explicit ``cache_dir`` > ``HF_HUB_CACHE`` > ``HF_HOME``/hub (read now) > huggingface_hub's."""
    if cache_dir is not None:
        return os.path.abspath(os.path.expanduser(os.fspath(cache_dir)))
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.abspath(os.path.expanduser(os.environ["HF_HUB_CACHE"]))
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.abspath(os.path.expanduser(os.environ["HF_HOME"])), "hub")
    from huggingface_hub import constants
    return os.path.abspath(os.path.expanduser(constants.HF_HUB_CACHE))


def cache_root(cache_dir=None):
    """The zoo's folder for upstream files and conversions: ``zoo`` next to the Hub cache."""
    return os.path.join(os.path.dirname(hub_cache_dir(cache_dir)), "zoo")


def expected_sha256(url_or_name, sha256=None):
    """The sha256 (or prefix) a file must have: the entry's, else the one in a torch.hub-style file name, else None."""
    if sha256:
        return sha256.lower()
    m = HASH_IN_NAME.search(os.path.basename(urllib.parse.urlsplit(url_or_name).path))
    return m.group(1) if m else None


def _check_sha(path, expected, where, shown=None, advice="It was removed; call again to download it anew."):
    digest = sha256_file(path)
    if expected and not digest.startswith(expected):
        raise UpstreamError(f"{where}: sha256 of {shown or path} is {digest}, expected {expected}"
                            f"{'...' if len(expected) < 64 else ''}: the file is truncated, corrupt or not the "
                            f"published one. {advice}")
    return digest


def _lock(path):
    from filelock import FileLock  # a dependency of huggingface_hub
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return FileLock(path + ".lock")


# -- plain URLs ---------------------------------------------------------------------------------------------------
def download_url(url, *, cache_dir=None, sha256=None, force_download=False, local_files_only=None, timeout=60):
    """Download ``url`` into the zoo cache (once) and return the local path, its sha256 checked.

    Args:
        url: ``http(s)://`` address of the file.
        cache_dir: A Hub cache directory; the file goes to ``<its parent>/zoo/downloads/`` (see ``cache_root``).
        sha256: Expected sha256 or prefix; default the torch.hub-style prefix in the file name, if any.
        force_download: Download again even if cached.
        local_files_only: Only the cache (default: ``HF_HUB_OFFLINE`` read now).
        timeout: Seconds to wait on the connection.

    Raises:
        UpstreamError: Offline and not cached, an HTTP or network error, fewer bytes than announced, or a sha256 that
            does not match (the partial or wrong file is removed).
    """
    name = os.path.basename(urllib.parse.urlsplit(url).path) or "download"
    folder = os.path.join(cache_root(cache_dir), "downloads", hashlib.sha256(url.encode()).hexdigest()[:16])
    path = os.path.join(folder, name)
    expected = expected_sha256(url, sha256)
    with _lock(path):
        if os.path.isfile(path) and not force_download:
            if not expected or sha256_file(path).startswith(expected):
                return path
            os.remove(path)  # a damaged cached copy: fetch it again below
        if _offline(local_files_only):
            raise UpstreamError(f"{url} is not in the local cache ({path}) and offline mode is on (HF_HUB_OFFLINE / "
                                f"local_files_only); load it once with network access first.")
        tmp = path + ".incomplete"
        request = urllib.request.Request(url, headers={"User-Agent": "zoo (python urllib)"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response, open(tmp, "wb") as f:
                announced = response.headers.get("Content-Length")
                shutil.copyfileobj(response, f, CHUNK)
                got = f.tell()
        except urllib.error.HTTPError as e:
            _remove(tmp)
            raise UpstreamError(f"{url}: HTTP {e.code} {e.reason}; nothing was downloaded.") from e
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            _remove(tmp)
            raise UpstreamError(f"{url}: download failed ({e}); nothing was kept, call again to retry.") from e
        if announced is not None and got != int(announced):
            _remove(tmp)
            raise UpstreamError(f"{url}: the download stopped after {got} of {announced} bytes (the connection closed "
                                f"early); nothing was kept, call again to retry.")
        try:
            _check_sha(tmp, expected, url, shown=path)
        except UpstreamError:
            _remove(tmp)
            raise
        os.replace(tmp, path)
    return path


def _remove(path):
    if os.path.exists(path):
        os.remove(path)


# -- sources and conversions --------------------------------------------------------------------------------------
def is_upstream(entry):
    """True when the entry's weights are an upstream file to convert (it names a converter)."""
    return bool(_field(entry, "converter"))


def source_of(entry):
    """Human-readable source of an upstream entry: its URL, or ``hf-hub:repo@revision/file``."""
    url = _field(entry, "url")
    if url:
        return url
    return f"hf-hub:{_field(entry, 'hf_hub_id')}@{_field(entry, 'revision', 'main')}/{_field(entry, 'file')}"


def fetch_source(entry, *, cache_dir=None, endpoint=None, force_download=False, local_files_only=None, token=None):
    """Local path of the upstream file of ``entry`` (downloaded if needed), its sha256 checked when known."""
    url = _field(entry, "url")
    if url:
        return download_url(url, cache_dir=cache_dir, sha256=_field(entry, "sha256"), force_download=force_download,
                            local_files_only=local_files_only)
    repo, file = _field(entry, "hf_hub_id"), _field(entry, "file", "model.safetensors")
    path, _ = hub.fetch(repo, _field(entry, "revision"), (file,), cache_dir=cache_dir, endpoint=endpoint,
                        force_download=force_download, local_files_only=_offline(local_files_only), token=token)
    _check_sha(path, expected_sha256(file, _field(entry, "sha256")), source_of(entry),
               advice="Download it again with force_download=True.")
    return path


def variant_of(model):
    """Digest of the model's tensor names, shapes and dtypes: the target a conversion was made for."""
    spec = sorted((k, list(v.shape), str(v.dtype)) for k, v in model.state_dict().items())
    return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]


def _identity(entry):
    """What a cached conversion must have been made from (any change invalidates it)."""
    return dict(format=FORMAT, source=source_of(entry), sha256=_field(entry, "sha256"),
                converter=_field(entry, "converter"), state_dict_key=state_dict_key(entry))


def converted_path(entry, model, cache_dir=None):
    """``model.safetensors`` of the cached conversion of ``entry`` for ``model`` (it may not exist yet)."""
    return os.path.join(cache_root(cache_dir), "converted", _field(entry, "tag"), variant_of(model),
                        "model.safetensors")


def _cached(path, entry):
    """The cached conversion's record if it is complete, from this source, and its sha256 matches; else None."""
    meta_path = os.path.join(os.path.dirname(path), "source.json")
    if not (os.path.isfile(path) and os.path.isfile(meta_path)):
        return None
    with open(meta_path) as f:
        meta = json.load(f)
    if {k: meta.get(k) for k in _identity(entry)} != _identity(entry):
        return None
    if sha256_file(path) != meta.get("converted_sha256"):
        return None  # damaged: convert again from the (verified) upstream file
    return meta


def load_upstream(model, entry, *, cache_dir=None, endpoint=None, force_download=False, local_files_only=None,
                  token=None):
    """Fill ``model`` with the upstream weights of ``entry``, converting them on the first load only.

    Args:
        model: The model the registry built for the entry's tag (its ``args`` applied).
        entry: A ``zoo.pretrained.PretrainedCfg`` (or a dict with the same fields): ``tag``, ``converter``, ``url`` or
            ``hf_hub_id`` + ``file`` (+ ``revision``), optional ``sha256`` and ``state_dict_key`` (top-level or in
            ``extra``; e.g. ``state_dict_ema`` for EAMLP).
        cache_dir, endpoint, force_download, local_files_only, token: Download options, as for ``zoo.hub``.

    Returns:
        The model, weights loaded strictly (``model.pretrained_source`` names the converted file and the source).

    Raises:
        UpstreamError: The upstream file cannot be fetched or fails its sha256.
        zoo.convert.CheckpointError: The file is truncated, corrupt, in another layout than the entry's converter,
            or does not fit the model; the message names the URL, the local file and what is wrong.
    """
    tag, layout = _field(entry, "tag"), _field(entry, "converter")
    if layout not in convert.CONVERTERS:
        raise ValueError(f"{tag}: converter {layout!r} is not a zoo.convert layout ({', '.join(convert.CONVERTERS)})")
    out = converted_path(entry, model, cache_dir)
    with _lock(out):
        meta = None if force_download else _cached(out, entry)
        if meta is None:
            src = fetch_source(entry, cache_dir=cache_dir, endpoint=endpoint, force_download=force_download,
                               local_files_only=local_files_only, token=token)
            try:
                convert.load_checkpoint(model, src, layout=layout, key=state_dict_key(entry))
            except convert.CheckpointError as e:
                raise convert.CheckpointError(f"upstream weights of {tag} from {source_of(entry)}: {e}") from e
            meta = _write_conversion(model, entry, src, out)
        else:
            convert.load_checkpoint(model, out, layout="zoo")
    model.pretrained_source = dict(converted=out, **meta)
    return model


def _write_conversion(model, entry, src, out):
    from safetensors.torch import save_file
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    meta = dict(_identity(entry), tag=_field(entry, "tag"), source_file=os.path.basename(src),
                source_sha256=sha256_file(src))
    tmp = out + ".incomplete"
    save_file(state, tmp, metadata={"format": "pt", **{k: str(v) for k, v in meta.items()}})
    os.replace(tmp, out)
    meta["converted_sha256"] = sha256_file(out)
    meta_tmp = os.path.join(os.path.dirname(out), "source.json.incomplete")
    with open(meta_tmp, "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
    os.replace(meta_tmp, os.path.join(os.path.dirname(out), "source.json"))  # written last: marks it complete
    return meta
