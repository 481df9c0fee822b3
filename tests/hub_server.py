"""A small Hugging Face Hub stand-in on 127.0.0.1, for tests of the real ``huggingface_hub`` client.

No Hub server can be installed or reached in CI (docs/hub.md), so this implements the endpoints ``HfApi`` and
``hf_hub_download`` use, in memory, with git-like commits (every commit is a full snapshot, so any past commit
stays downloadable):

- ``POST /api/repos/create``                          create a model repo (409 if it exists)
- ``POST /api/validate-yaml``                         check a README's YAML front matter (parsed with PyYAML)
- ``POST /api/models/{repo}/preupload/{rev}``         upload mode of each file: always ``regular`` (base64 inside
                                                      the commit; no LFS / Xet storage), with the remote blob oid
                                                      so unchanged files are skipped as on the Hub
- ``POST /api/models/{repo}/commit/{rev}``            NDJSON commit: header, ``file`` (base64), ``deletedFile``;
                                                      applied all at once or not at all; ``parentCommit`` checked
- ``POST /api/models/{repo}/branch/{branch}``         create a branch from ``main`` (409 if it exists)
- ``GET  /api/models/{repo}[/revision/{rev}]``        model info: ``id``, ``sha``, ``private``, ``siblings``
- ``GET  /api/models/{repo}/tree/{rev}[/{path}]``     list files (``type``, ``path``, ``size``, ``oid``, ``lfs``)
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``           a file, with the headers the client needs: ``ETag`` (and
                                                      ``X-Linked-Etag``/``X-Linked-Size`` for weight files, whose
                                                      etag is their sha256 as for LFS files on the Hub),
                                                      ``X-Repo-Commit``, ``Content-Length``, ``Accept-Ranges``;
                                                      ``Range: bytes=a-[b]`` answers 206 with ``Content-Range``

Errors carry the ``X-Error-Code`` header the client maps to its exceptions (``RepoNotFound``,
``RevisionNotFound``, ``EntryNotFound``). Writes need ``Authorization: Bearer <token>`` equal to
``HubServer.token``; private repos need it for reads too. Every request is recorded in ``HubServer.requests``
(method, path, lower-case headers) so tests can check what the client sent.

Fault injection for tests (each flag is consumed by the next matching request):

- ``fail_commits = n``: the next n commit requests answer 500 and change nothing.
- ``drop_downloads = {filename: nbytes}``: the next GET of that file sends full headers, ``nbytes`` of the
  body, then closes the connection (an interrupted download).
- ``fail_resumes = n``: the next n ranged GETs answer 500 (the client's in-call resume fails too).

Run on its own (e.g. to try ``tools/publish.py`` by hand), from the repository root::

    python -m tests.hub_server --port 8123 [--token hf_...]    # or: python tests/hub_server.py --port 8123

It prints the ``HF_ENDPOINT`` / ``HF_TOKEN`` to export and serves until SIGINT or SIGTERM (exit status 0).
"""
import argparse
import base64
import hashlib
import json
import re
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

# Files the Hub's default .gitattributes stores in LFS: their ETag is the sha256 of the content.
LFS_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt", ".ckpt", ".h5", ".msgpack", ".onnx")


@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    """A running local Hub for one test: HF_ENDPOINT, HF_HOME, HF_HUB_CACHE and HF_TOKEN point at it and at
    ``tmp_path`` (nothing touches the user's cache). Import it into a test module to use it."""
    server = HubServer(token="hf_secret_test_token_123").start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))
    monkeypatch.setenv("HF_TOKEN", server.token)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield server
    server.stop()


def git_blob_oid(data):
    """The git blob id of ``data`` (what the Hub reports as a regular file's oid)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    """A model repo: commits are full snapshots ``{path: bytes}``; branches point at commits."""

    def __init__(self, repo_id, private):
        self.repo_id, self.private = repo_id, private
        first = hashlib.sha1(f"init {repo_id} {time.time_ns()}".encode()).hexdigest()
        self.commits = {first: {}}
        self.branches = {"main": first}
        self.lock = threading.Lock()

    def resolve(self, rev):
        if rev in self.branches:
            return self.branches[rev]
        if rev in self.commits:
            return rev
        full = [c for c in self.commits if len(rev) >= 7 and c.startswith(rev)]
        return full[0] if len(full) == 1 else None


class HubServer:
    """Start with ``HubServer().start()``; ``url`` is the endpoint; ``stop()`` shuts it down."""

    def __init__(self, token="hf_test_token"):
        self.token = token
        self.repos = {}
        self.requests = []
        self.fail_commits = 0
        self.drop_downloads = {}
        self.fail_resumes = 0
        self._httpd = None
        self._thread = None

    # -- lifecycle ------------------------------------------------------------------------------------------------
    def start(self, port=0):
        server = self

        class Handler(_Handler):
            hub = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._port = self._httpd.server_address[1]
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    @property
    def port(self):
        return self._port

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    # -- direct access for tests ------------------------------------------------------------------------------------
    def files(self, repo_id, rev="main"):
        """``{path: bytes}`` of a repo at a revision (a copy)."""
        repo = self.repos[repo_id]
        return dict(repo.commits[repo.resolve(rev)])

    def head(self, repo_id, branch="main"):
        return self.repos[repo_id].branches[branch]

    def put_file(self, repo_id, path, data, branch="main"):
        """Commit one file directly (bypassing the API), e.g. to serve a corrupted file; returns the commit."""
        repo = self.repos[repo_id]
        with repo.lock:
            snap = dict(repo.commits[repo.branches[branch]])
            snap[path] = bytes(data)
            return _new_commit(repo, branch, snap, f"put {path}")


def _new_commit(repo, branch, snapshot, summary):
    parent = repo.branches[branch]
    oid = hashlib.sha1(f"{parent} {summary} {time.time_ns()} {sorted(snapshot)}".encode()).hexdigest()
    repo.commits[oid] = snapshot
    repo.branches[branch] = oid
    return oid


def _etag(path, data):
    return hashlib.sha256(data).hexdigest() if path.endswith(LFS_SUFFIXES) else git_blob_oid(data)


class _Handler(BaseHTTPRequestHandler):
    hub = None  # set by HubServer.start
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # keep test output clean
        pass

    # -- plumbing -------------------------------------------------------------------------------------------------
    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status, body=b"", headers=None, content_type="application/json", head=False):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)
        self.close_connection = True

    def _error(self, status, code=None, message="", head=False, headers=None):
        h = dict(headers or {})
        if code:
            h["X-Error-Code"] = code
        if message:
            h["X-Error-Message"] = message
        self._send(status, {"error": message or code or "error"}, h, head=head)

    def _authorized(self):
        return self.headers.get("Authorization") == f"Bearer {self.hub.token}"

    def _record(self):
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.hub.requests.append({"method": self.command, "path": self.path, "headers": headers})

    def _repo(self, repo_id, write=False, head=False):
        repo = self.hub.repos.get(repo_id)
        if repo is None or (repo.private and not self._authorized()):
            self._error(404, "RepoNotFound", "Repository not found", head=head)
            return None
        if write and not self._authorized():
            self._error(401, None, "Invalid credentials in Authorization header", head=head)
            return None
        return repo

    def _at_revision(self, repo_id, rev, write=False, head=False):
        """The repo and the commit ``rev`` names, or ``(None, None)`` once the 404/401 answer is sent."""
        repo = self._repo(repo_id, write=write, head=head)
        if repo is None:
            return None, None
        commit = repo.resolve(rev)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head=head)
            return None, None
        return repo, commit

    # -- routing --------------------------------------------------------------------------------------------------
    def do_HEAD(self):
        self._record()
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", urlsplit(self.path).path)
        if not m:
            return self._error(404, None, "not found", head=True)
        self._resolve(*map(unquote, m.groups()), head=True)

    def do_GET(self):
        self._record()
        url = urlsplit(self.path)
        path, query = url.path, parse_qs(url.query)
        if m := re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path):
            return self._resolve(*map(unquote, m.groups()))
        if m := re.match(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?$", path):
            return self._tree(unquote(m[1]), unquote(m[2]), unquote(m[3] or ""), query)
        if m := re.match(r"^/api/models/([^/]+/[^/]+?)(?:/revision/([^/]+))?$", path):
            return self._info(unquote(m[1]), unquote(m[2] or "main"))
        self._error(404, None, f"no route for GET {path}")

    def do_POST(self):
        self._record()
        path = urlsplit(self.path).path
        body = self._body()
        if path == "/api/repos/create":
            return self._create(json.loads(body or b"{}"))
        if path == "/api/validate-yaml":
            return self._validate_yaml(json.loads(body or b"{}"))
        if m := re.match(r"^/api/models/([^/]+/[^/]+)/preupload/([^/]+)$", path):
            return self._preupload(unquote(m[1]), unquote(m[2]), json.loads(body or b"{}"))
        if m := re.match(r"^/api/models/([^/]+/[^/]+)/commit/([^/]+)$", path):
            return self._commit(unquote(m[1]), unquote(m[2]), body)
        if m := re.match(r"^/api/models/([^/]+/[^/]+)/branch/([^/]+)$", path):
            return self._branch(unquote(m[1]), unquote(m[2]), json.loads(body or b"{}"))
        self._error(404, None, f"no route for POST {path}")

    # -- endpoints ------------------------------------------------------------------------------------------------
    def _create(self, payload):
        if not self._authorized():
            return self._error(401, None, "Invalid credentials in Authorization header")
        name, org = payload.get("name"), payload.get("organization")
        if (payload.get("type") or "model") != "model":
            return self._error(400, None, "this test server only hosts model repos")
        repo_id = f"{org}/{name}" if org else name
        if repo_id in self.hub.repos:  # the Hub's 409 body still carries the url (the client reads it)
            return self._send(409, {"error": "You already created this model repo", "url": f"{self.hub.url}/{repo_id}"},
                              {"X-Error-Message": "You already created this model repo"})
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        self.hub.repos[repo_id] = Repo(repo_id, private)
        self._send(200, {"url": f"{self.hub.url}/{repo_id}", "name": repo_id, "id": repo_id})

    def _validate_yaml(self, payload):
        import yaml  # a dependency of huggingface_hub
        content = payload.get("content", "")
        errors = []
        m = re.match(r"^---\n(.*?)\n---\n", content, flags=re.S)
        if not m:
            errors.append({"message": "README.md has no YAML front matter"})
        else:
            try:
                meta = yaml.safe_load(m[1])
                if not isinstance(meta, dict):
                    errors.append({"message": "front matter is not a mapping"})
            except yaml.YAMLError as e:
                errors.append({"message": f"invalid YAML: {e}"})
        self._send(400 if errors else 200, {"errors": errors, "warnings": []})

    def _preupload(self, repo_id, rev, payload):
        repo, commit = self._at_revision(repo_id, rev, write=True)
        if repo is None:
            return
        snap = repo.commits[commit]
        files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                  "oid": git_blob_oid(snap[f["path"]]) if f["path"] in snap else None}
                 for f in payload.get("files", [])]
        self._send(200, {"files": files, "commitOid": commit})

    def _commit(self, repo_id, branch, body):
        repo = self._repo(repo_id, write=True)
        if repo is None:
            return
        if branch not in repo.branches:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {branch}")
        if self.hub.fail_commits > 0:
            self.hub.fail_commits -= 1
            return self._error(500, None, "Internal Error - We're working hard to fix this as soon as possible!")
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            return self._error(400, None, "commit payload must start with a header line")
        header = lines[0]["value"]
        with repo.lock:
            parent = header.get("parentCommit")
            if parent and not repo.branches[branch].startswith(parent):
                return self._error(412, None, "A commit has happened since. Please refresh and try again.")
            snap = dict(repo.commits[repo.branches[branch]])
            for op in lines[1:]:
                key, value = op.get("key"), op.get("value", {})
                if key == "file":
                    if value.get("encoding") != "base64":
                        return self._error(400, None, f"unsupported encoding {value.get('encoding')}")
                    snap[value["path"]] = base64.b64decode(value["content"])
                elif key == "deletedFile":
                    if value["path"] not in snap:
                        return self._error(404, "EntryNotFound", "A file with this name doesn't exist")
                    del snap[value["path"]]
                else:
                    return self._error(400, None, f"this test server does not support {key!r} operations")
            oid = _new_commit(repo, branch, snap, header.get("summary", ""))
        self._send(200, {"commitUrl": f"{self.hub.url}/{repo_id}/commit/{oid}", "commitOid": oid,
                         "success": True, "pullRequestUrl": None})

    def _branch(self, repo_id, branch, payload):
        repo = self._repo(repo_id, write=True)
        if repo is None:
            return
        if branch in repo.branches:
            return self._error(409, None, f"Reference already exists: refs/heads/{branch}")
        start = repo.resolve(payload.get("startingPoint") or "main")
        if start is None:
            return self._error(404, "RevisionNotFound", "Invalid starting point")
        repo.branches[branch] = start
        self._send(200, {})

    def _info(self, repo_id, rev):
        repo, commit = self._at_revision(repo_id, rev)
        if repo is None:
            return
        self._send(200, {"id": repo_id, "modelId": repo_id, "sha": commit, "private": repo.private,
                         "siblings": [{"rfilename": p} for p in sorted(repo.commits[commit])],
                         "tags": [], "downloads": 0, "likes": 0})

    def _tree(self, repo_id, rev, prefix, query):
        repo, commit = self._at_revision(repo_id, rev)
        if repo is None:
            return
        recursive = query.get("recursive", ["False"])[0].lower() in ("true", "1")
        entries, folders = [], set()
        for p, data in sorted(repo.commits[commit].items()):
            if prefix and not p.startswith(prefix.rstrip("/") + "/"):
                continue
            rest = p[len(prefix.rstrip("/") + "/"):] if prefix else p
            if "/" in rest and not recursive:
                folders.add((prefix.rstrip("/") + "/" if prefix else "") + rest.split("/")[0])
                continue
            entry = {"type": "file", "path": p, "size": len(data), "oid": git_blob_oid(data)}
            if p.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        entries += [{"type": "directory", "path": f, "oid": hashlib.sha1(f.encode()).hexdigest()}
                    for f in sorted(folders)]
        self._send(200, entries)

    def _resolve(self, repo_id, rev, path, head=False):
        repo, commit = self._at_revision(repo_id, rev, head=head)
        if repo is None:
            return
        snap = repo.commits[commit]
        if path not in snap:
            return self._error(404, "EntryNotFound", f"{path} does not exist", head=head,
                               headers={"X-Repo-Commit": commit})
        data = snap[path]
        etag = _etag(path, data)
        headers = {"ETag": f'"{etag}"', "X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if path.endswith(LFS_SUFFIXES):
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
        if head:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.close_connection = True
            return
        rng = self.headers.get("Range")
        if rng:
            if self.hub.fail_resumes > 0:
                self.hub.fail_resumes -= 1
                return self._error(500, None, "Internal Error (injected: resume refused)")
            m = re.match(r"^bytes=(\d+)-(\d*)$", rng.strip())
            if not m:
                return self._error(416, None, f"bad range {rng}")
            start = int(m[1])
            end = int(m[2]) if m[2] else len(data) - 1
            if start >= len(data) or end < start:
                return self._error(416, None, f"range {rng} outside 0-{len(data) - 1}")
            end = min(end, len(data) - 1)
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            return self._send(206, data[start:end + 1], headers, content_type="application/octet-stream")
        name = path.rsplit("/", 1)[-1]
        if name in self.hub.drop_downloads:
            cut = self.hub.drop_downloads.pop(name)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data[:cut])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)  # mid-body: the client sees a truncated response
            return
        self._send(200, data, headers, content_type="application/octet-stream")


def main(argv=None):
    """Serve until SIGINT/SIGTERM: ``python -m tests.hub_server --port N [--token T]``.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``).

    Returns:
        0 after a clean shutdown.
    """
    parser = argparse.ArgumentParser(description="Local Hugging Face Hub stand-in (tests/hub_server.py) on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--token", default="hf_test_token", help="the token writes (and private reads) must carry")
    args = parser.parse_args(argv)
    server = HubServer(token=args.token).start(port=args.port)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # both end in a clean shutdown rather than a traceback
        signal.signal(sig, lambda *_: stop.set())
    print(f"Hub stand-in serving on {server.url}; use it with: export HF_ENDPOINT={server.url} HF_TOKEN={args.token}",
          flush=True)
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
