"""FID, KID and IS from the features of a feature network passed as a parameter.

Heusel et al., "GANs Trained by a Two Time-Scale Update Rule Converge to a Local Nash Equilibrium" (FID, NeurIPS
2017), https://arxiv.org/abs/1706.08500; Binkowski et al., "Demystifying MMD GANs" (KID, ICLR 2018),
https://arxiv.org/abs/1801.01401; Salimans et al., "Improved Techniques for Training GANs" (IS, NeurIPS 2016),
https://arxiv.org/abs/1606.03498.

The metric keys carry the network's name (``FID(fmnist-clf)``, ``KID(inception-v3)``): a Fashion-MNIST-classifier
FID is a different number from the Inception FID of the literature and must not be compared with it.
"""
import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.registry import METRICS

from .feature_nets import build_feature_net


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


@METRICS.register_module()
class GenMetric(BaseMetric):
    """FID / KID / IS of generated images against the real images of the evaluation dataloader.

    The model's ``val_step`` / ``test_step`` returns one dict per real image with ``real`` and ``fake`` images in
    [-1, 1] (the GAN draws as many samples as the loader has real images, with per-index seeds); this metric
    embeds both with the feature network and compares the sets.

    Args:
        feature_net: The feature network (see ``tasks.gen.feature_nets.build_feature_net``), e.g. ``'fmnist-clf'`` or
            ``dict(type='inception-v3', weights=PATH)``.
        scores: Any of ``FID``, ``KID``, ``IS`` (IS needs a network with class logits; it scores the fakes). (Not
            named ``metrics``: mmengine would take a dict with that key for an ``Evaluator`` config.)
        kid_subsets, kid_subset_size: KID subset sampling.
        is_splits: IS splits.
        real_is: Also report the IS of the real images (a reference for the fake IS).
    """

    default_prefix = ""  # keys are 'FID(<net>)' etc., no prefix

    def __init__(self, feature_net="fmnist-clf", scores=("FID", "KID", "IS"), kid_subsets=100, kid_subset_size=1000,
                 is_splits=10, real_is=False, collect_device="cpu", prefix=None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        bad = set(scores) - {"FID", "KID", "IS"}
        if bad:
            raise ValueError(f"GenMetric: unknown scores {sorted(bad)}; choose from FID, KID, IS")
        self.net = build_feature_net(feature_net)
        self.net_name = self.net.name
        self.scores = tuple(scores)
        self.kid_subsets, self.kid_subset_size, self.is_splits, self.real_is = (kid_subsets, kid_subset_size,
                                                                                 is_splits, real_is)

    @torch.no_grad()
    def _embed(self, images):
        p = next(self.net.parameters(), None)
        if p is not None and p.device != images.device:
            self.net.to(images.device)
        feats, logits = self.net(images.float())
        return feats.double().cpu().numpy(), (None if logits is None else logits.double().cpu().numpy())

    def process(self, data_batch, data_samples):
        """Embed one batch of real and fake images; one result per sample (so DDP collection keeps the count)."""
        real = torch.stack([s["real"] for s in data_samples])
        fake = torch.stack([s["fake"] for s in data_samples])
        fr, lr = self._embed(real)
        ff, lf = self._embed(fake)
        for i in range(len(fake)):
            self.results.append((fr[i], ff[i], None if lf is None else lf[i], None if lr is None else lr[i]))

    def compute_metrics(self, results):
        real = np.stack([r[0] for r in results])
        fake = np.stack([r[1] for r in results])
        out, n = {}, self.net_name
        if "FID" in self.scores:
            out[f"FID({n})"] = fid_from_features(real, fake)
        if "KID" in self.scores:
            out[f"KID({n})"], out[f"KID_std({n})"] = kernel_inception_distance(
                real, fake, self.kid_subsets, self.kid_subset_size)
        if "IS" in self.scores:
            if results[0][2] is None:
                raise ValueError(f"IS needs a feature network with class logits; {n} returns none")
            out[f"IS({n})"], out[f"IS_std({n})"] = inception_score(np.stack([r[2] for r in results]), self.is_splits)
            if self.real_is:
                out[f"IS_real({n})"], _ = inception_score(np.stack([r[3] for r in results]), self.is_splits)
        return out
