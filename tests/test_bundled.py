"""The checkpoints bundled under pretrained/ load and score what their records say (evaluation is deterministic).

Fast: each one is scored on the fixed slice of its evaluation split that ``tools/make_weights.py`` scored when it
made the checkpoint (``results/metrics/<tag>.json``: ``slice``), one thread, and must get the same numbers.
Slow (``make test-slow``): each one is scored on the whole split and must match its card (``config.json``), which
came from ``tools/test.py --json-out``.
"""
import json
import os

import pytest
import torch

from zoo import pretrained

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAGS = sorted(t for t, e in pretrained.read_index().items() if os.path.isdir(e.bundled_dir))


def _record(tag):
    with open(os.path.join(ROOT, "results", "metrics", f"{tag}.json")) as f:
        return json.load(f)


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the records were measured with one thread: GEMM reductions then match bit for bit
    yield
    torch.set_num_threads(threads)


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
    assert got == pytest.approx(rec["metrics"], abs=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("tag", TAGS)
def test_bundled_checkpoint_matches_its_card(tag, one_thread, tmp_path):
    card = pretrained.read_index()[tag].metrics
    got = _score(tag, None, tmp_path)
    assert {k: got[k] for k in card} == pytest.approx(card, abs=1e-4)


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
    assert json.loads(out.read_text())["metrics"] == pytest.approx(rec["metrics"], abs=1e-6)
