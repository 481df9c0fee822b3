"""The test Hub server runs on its own (``python -m tests.hub_server`` / ``python tests/hub_server.py``), and the
repository's ``tests`` package is the one imported from the repository root although mmsegmentation installs a
top-level ``tests`` package of its own."""
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_repo_tests_package_wins_over_site_packages():
    out = subprocess.run([sys.executable, "-c", "import tests; print(tests.__file__)"], cwd=ROOT, text=True,
                         capture_output=True, timeout=60, check=True).stdout.strip()
    assert out == os.path.join(ROOT, "tests", "__init__.py")


@pytest.mark.parametrize("how", [["-m", "tests.hub_server"], ["tests/hub_server.py"]], ids=["module", "script"])
def test_server_starts_alone_and_serves_the_real_client(how, tmp_path, free_port):
    from huggingface_hub import HfApi, hf_hub_download
    port, token = free_port, "hf_standalone_token"
    proc = subprocess.Popen([sys.executable, *how, "--port", str(port), "--token", token], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        url = f"http://127.0.0.1:{port}"
        assert f"export HF_ENDPOINT={url} HF_TOKEN={token}" in line, (line, proc.stderr.read() if proc.poll() else "")
        api = HfApi(endpoint=url, token=token)
        api.create_repo("org/standalone")
        (tmp_path / "weights.txt").write_text("hello hub")
        api.upload_file(path_or_fileobj=str(tmp_path / "weights.txt"), path_in_repo="weights.txt",
                        repo_id="org/standalone")
        got = hf_hub_download("org/standalone", "weights.txt", endpoint=url, token=token,
                              cache_dir=str(tmp_path / "cache"))
        assert open(got).read() == "hello hub"
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0, proc.stderr.read()
