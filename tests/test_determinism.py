"""Training is deterministic for a given seed: the bundled checkpoints' command (``tools/make_weights.py``: seed,
deterministic algorithms, one thread), run twice, gives bit-identical weights; another seed gives other weights."""
import torch

from .test_train_cls import ROOT, run_tool, tiny_config, write_fmnist


def _train(tmp_path, cfg, name, seed):
    work = tmp_path / name
    # Random augmentation on, so the seed has to drive the data pipeline too, not only the initialisation.
    proc = run_tool([ROOT / "tools/train.py", cfg, "--work-dir", work, "--cfg-options", f"randomness.seed={seed}",
                     "randomness.deterministic=True"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ckpt = (work / "last_checkpoint").read_text().strip()
    return torch.load(ckpt, map_location="cpu", weights_only=False)["state_dict"]


def test_same_seed_same_weights(tmp_path):
    write_fmnist(tmp_path / "fmnist", n_train=32)
    cfg = tiny_config(tmp_path, tmp_path / "fmnist", max_iters=3, extra="""
train_dataloader = dict(dataset=dict(pipeline=[dict(type='ClsRandomCrop', size=28, padding=2),
                                               dict(type='RandomFlip', prob=0.5, direction='horizontal'),
                                               dict(type='PackClsInputs', mean=(128.,), std=(64.,))]))
""")
    a, b, c = (_train(tmp_path, cfg, n, s) for n, s in (("a", 0), ("b", 0), ("c", 1)))
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
