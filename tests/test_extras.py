"""What a base install (``pip install zoo``, no extras) gives, checked in a subprocess that cannot import mmengine,
mmcv or mmseg: classification, point-cloud and generation models and the Hub work; segmentation and training say
in one line which extra to install."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A sys.meta_path finder that makes the `seg`/`train` extras look uninstalled.
BLOCK_MM = textwrap.dedent("""
    import sys

    class _NoMM:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {"mmengine", "mmcv", "mmseg"}:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoMM())
""")


def _run(code, timeout=300):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", BLOCK_MM + textwrap.dedent(code)], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout)


def test_base_install_serves_cls_points_gen_and_the_hub(tmp_path):
    r = _run(f"""
        import torch, zoo
        clf = zoo.load("sa_vit_micro", task="cls", num_classes=10, img_size=28, in_chans=1, patch_size=4).eval()
        pcls = zoo.load("ea_vit_micro", task="pcls", num_classes=4, num_points=64).eval()
        pseg = zoo.load("effa_vit_micro", task="pseg", num_classes=50, num_categories=16).eval()
        gan = zoo.load("ff_vit_micro", task="gen", img_size=32, out_chans=1).eval()
        with torch.no_grad():
            assert clf(torch.randn(2, 1, 28, 28)).shape == (2, 10)
            assert pcls(torch.randn(2, 64, 3)).shape == (2, 4)
            assert gan.sample(2, seed=0).shape[:2] == (2, 1)
        zoo.save_pretrained(clf, {str(tmp_path / "pub")!r})
        again = zoo.load("local-dir:{tmp_path / "pub"}").eval()
        x = torch.randn(1, 1, 28, 28)
        with torch.no_grad():
            assert torch.equal(again(x), clf(x))
        assert not [m for m in sys.modules if m.split(".")[0] in ("mmengine", "mmcv", "mmseg")]
        print("base ok")
    """)
    assert r.returncode == 0 and "base ok" in r.stdout, r.stderr[-3000:]


def test_seg_without_mmseg_names_the_extra_in_one_line():
    r = _run("""
        import zoo
        zoo.load("sa_vit_micro", task="seg", num_classes=11, img_size=64)
    """)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: task 'seg' needs mmsegmentation") and "pip install 'zoo[seg]'" in last, \
        r.stderr[-3000:]
    assert "During handling of the above exception" not in r.stderr  # one error, not a chain of them


def test_training_without_the_train_extra_names_it():
    r = _run("""
        import runpy
        sys.argv = ["tools/train.py", "configs/cls/sa-vit-micro-p4_1xb128-300it_fmnist-28.py"]
        runpy.run_path("tools/train.py", run_name="__main__")
    """)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert "pip install 'zoo[train]'" in last, r.stderr[-3000:]
