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
    # spectral norm on every conv/linear of D (trunk included)
    layers = [m for m in gan.discriminator.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert layers and all(hasattr(m, "parametrizations") for m in layers)
    s = gan.sample(5, seed=1)
    assert s.shape == (5, 3, 32, 32) and s.min() >= -1 and s.max() <= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.list_models())
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


def test_gen_metric_names_keys_after_the_network():
    from tasks.gen.metrics import GenMetric, fid_from_features
    metric = GenMetric(feature_net=_MeanFeatures(), scores=("FID", "KID"), kid_subset_size=1000)
    g = torch.Generator().manual_seed(0)
    real = torch.rand(40, 1, 8, 8, generator=g) * 2 - 1
    fake = torch.rand(40, 1, 8, 8, generator=g) * 0.5
    for i in range(0, 40, 10):
        metric.process({}, [dict(real=r, fake=f) for r, f in zip(real[i:i + 10], fake[i:i + 10])])
    out = metric.compute_metrics(metric.results)
    assert set(out) == {"FID(toy)", "KID(toy)", "KID_std(toy)"}
    feats = lambda t: torch.cat([t.mean(dim=(2, 3)), t.std(dim=(2, 3))], 1).double().numpy()  # noqa: E731
    assert out["FID(toy)"] == pytest.approx(fid_from_features(feats(real), feats(fake)), rel=1e-9)
    with pytest.raises(ValueError, match="class logits"):
        GenMetric(feature_net=_MeanFeatures(), scores=("IS",)).compute_metrics(metric.results)


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
    torch.save({"foo.weight": torch.zeros(1)}, tmp_path / "bad.pth")
    with pytest.raises(ValueError, match="pt_inception"):
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


def test_inception_feature_net_needs_its_weights_file():
    from tasks.gen.feature_nets import build_feature_net
    with pytest.raises(FileNotFoundError, match="pt_inception-2015-12-05"):
        build_feature_net(dict(type="inception-v3", weights="/nonexistent/pt_inception.pth"))
    with pytest.raises(ValueError, match="unknown feature network"):
        build_feature_net("vgg")


def test_gen_configs_parse_and_name_registered_models():
    import glob
    import os
    from mmengine.config import Config
    from mmengine.registry import MODELS
    import tasks.gen  # noqa: F401
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = sorted(glob.glob(os.path.join(root, "configs/gen/*.py")))
    assert len(paths) == 12
    for path in paths:
        cfg = Config.fromfile(path)
        mixer, size = os.path.basename(path).split("_")[1].split("-vit-")
        assert cfg.model.name == f"{mixer}_vit_{size}"
        assert cfg.model.out_chans == (3 if "cifar10" in path else 1)
        assert cfg.optim_wrapper.generator.optimizer.lr == 1e-4 and cfg.optim_wrapper.discriminator.optimizer.lr == 4e-4
        assert cfg.test_evaluator.type == "GenMetric"
        if size == "micro":
            model = MODELS.build(cfg.model)
            assert model.zoo_model.zoo_config["name"] == cfg.model.name
