"""Pixel affinities and the random walk along them (AffinityNet's refinement).

Ahn and Kwak, "Learning Pixel-level Semantic Affinity with Image-level Supervision" (CVPR 2018): a small head
predicts for every pixel whether its neighbour at each of a few offsets carries the same class (``AffinityHead``;
trained with ``affinity_loss`` on targets that come from a semantic label map alone, ``affinity_targets``), and class
probabilities are spread along those affinities by a random walk (``random_walk``): each step replaces a pixel's
probabilities by the weighted mean of its own (weight 1) and its neighbours' (weight ``affinity ** beta``), inside a
mask. ``walked_labels`` names the pixels a segmentor calls an item by the walked probabilities and leaves its
background as it was. ``zoo.heads.seg.ZooEncoderDecoder(refine=...)`` runs them at inference.

The walk of ``steps`` steps is the matrix power P^steps applied to the probabilities, with P = D^-1 A for the
symmetric weights A (1 on the diagonal) and their row sums D: P is similar to the symmetric D^-1/2 A D^-1/2, so its
eigenvalues are real and in [-1, 1]. On that interval x^t is within ``tol`` of its Chebyshev series cut at degree m,
where the coefficients 2^(1-t) C(t, (t-k)/2) beyond m sum to under ``tol``: m grows as sqrt(t), 110 for 800 steps at
tol 1e-4 and 124 at 1e-5. ``random_walk(..., tol=)`` evaluates that polynomial with Chebyshev's three-term recurrence
(T_k+1 = 2 P T_k - T_k-1), one application of P per degree, instead of t steps: the same walk to within ``tol``
(in the D-weighted norm; measured elementwise in the tests) for a sixth of the work at 800 steps.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NEIGHBOURS = ((0, 1), (1, 0))  # right, down


def offsets_within(radius):
    """The neighbour offsets (dy, dx) of a pixel within Euclidean ``radius``, one of each pair (dy > 0, or dy == 0
    and dx > 0), nearest first: radius 1 gives right and down, 1.5 adds the two diagonals, 2 gives 6, 3 gives 14."""
    r = int(radius)
    offs = [(dy, dx) for dy in range(0, r + 1) for dx in range(-r, r + 1)
            if (dy > 0 or dx > 0) and dy * dy + dx * dx <= radius * radius]
    return tuple(sorted(offs, key=lambda o: (o[0] ** 2 + o[1] ** 2, o)))


def pair_views(t, offset):
    """Views (a, b) of the last two dims of ``t`` such that b[..., y, x] is the pixel ``offset`` = (dy >= 0, dx)
    away from a[..., y, x]; pairs whose partner falls outside the image are left out."""
    dy, dx = offset
    h, w = t.shape[-2:]
    a = t[..., :h - dy, max(0, -dx):w - max(0, dx)]
    b = t[..., dy:, max(0, dx):w - max(0, -dx)]
    return a, b


class AffinityHead(nn.Module):
    """(B, O, H, W) logits that a pixel and its neighbour at each of the O ``offsets`` share a class (by default
    right (channel 0) and lower (channel 1)), from the image (B, 3, H, W) and features (B, C, h, w) (resized to
    H x W): two 3x3 convolutions of ``channels`` at the image's resolution and a 1x1 one."""

    def __init__(self, in_channels, channels=32, image_channels=3, offsets=NEIGHBOURS):
        super().__init__()
        self.offsets = tuple(tuple(o) for o in offsets)
        self.net = nn.Sequential(
            nn.Conv2d(image_channels + in_channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(True),
            nn.Conv2d(channels, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU(True),
            nn.Conv2d(channels, len(self.offsets), 1))

    def forward(self, image, feats):
        feats = F.interpolate(feats, size=image.shape[-2:], mode="bilinear", align_corners=False)
        return self.net(torch.cat([image, feats], 1))


def affinity_targets(labels, ignore_index=255, offsets=NEIGHBOURS):
    """For each offset, ``(same, valid)`` over the pairs of ``pair_views``: whether the two pixels of (B, H, W)
    integer ``labels`` carry the same label, and whether both are labelled at all."""
    ok = labels != ignore_index
    out = []
    for o in offsets:
        (la, lb), (oa, ob) = pair_views(labels, o), pair_views(ok, o)
        out.append(((la == lb).float(), oa & ob))
    return out


def affinity_loss(logits, labels, ignore_index=255, offsets=NEIGHBOURS):
    """Mean binary cross-entropy of the (B, O, H, W) affinity ``logits`` over the labelled pairs of every offset."""
    parts = []
    for k, (o, (same, valid)) in enumerate(zip(offsets, affinity_targets(labels, ignore_index, offsets))):
        lg = pair_views(logits[:, k], o)[0]
        parts.append(F.binary_cross_entropy_with_logits(lg, same, reduction="none")[valid])
    return torch.cat(parts).mean()


def chebyshev_power(steps, tol):
    """Coefficients ``c`` (a list, index k) of x^steps in Chebyshev polynomials T_k on [-1, 1], cut at the lowest
    degree whose dropped coefficients sum to at most ``tol`` (all of them are >= 0 and sum to 1)."""
    t = int(steps)
    coef = [0.0] * (t + 1)
    for j in range(t // 2 + 1):  # x^t = 2^(1-t) sum_j C(t, j) T_(t-2j), the T_0 term (t even) halved
        k = t - 2 * j
        log_c = math.lgamma(t + 1) - math.lgamma(j + 1) - math.lgamma(t - j + 1) + (1 - t) * math.log(2)
        coef[k] = math.exp(log_c) / (2.0 if k == 0 else 1.0)
    tail, m = 0.0, t
    while m > 0 and tail + coef[m] <= tol:
        tail += coef[m]
        m -= 1
    return coef[:m + 1]


class _Transition:
    """P = D^-1 A of the walk as pairs of views: A has 1 on the diagonal and ``affinity ** beta`` between a pixel and
    its neighbour at each offset when both are in ``mask``; ``apply(x)`` is P x over (B, K, H, W)."""

    def __init__(self, affinity, mask, beta, offsets, dtype):
        m = mask.to(dtype)
        a = affinity.to(dtype).clamp(0, 1) ** beta
        den = torch.ones_like(m)
        self.pairs = []
        for k, o in enumerate(offsets):
            ma, mb = pair_views(m, o)
            w = pair_views(a[:, k], o)[0] * ma * mb  # pixel p with p + o
            da, db = pair_views(den, o)
            da += w
            db += w
            self.pairs.append((o, w[:, None]))
        self.inv = den.reciprocal()[:, None]

    def apply(self, x, inv=None):
        """P x (``inv`` in place of D^-1: ``2 * self.inv`` gives 2 P x), a new tensor."""
        out = x.clone()
        for o, w in self.pairs:
            (xa, xb), (na, nb) = pair_views(x, o), pair_views(out, o)
            na.addcmul_(w, xb)
            nb.addcmul_(w, xa)
        return out.mul_(self.inv if inv is None else inv)


def random_walk(probs, affinity, mask, beta, steps, offsets=NEIGHBOURS, tol=None):
    """Spread (B, K, H, W) ``probs`` along the (B, O, H, W) ``affinity`` (probabilities, as ``AffinityHead``'s
    sigmoid, one channel per offset) for ``steps`` steps within the (B, H, W) bool ``mask``: each step sets every pixel
    to the weighted mean of itself (weight 1) and its neighbours inside the mask (weight ``affinity ** beta`` of the
    pair). Pixels outside the mask keep their values and pass nothing on.

    ``tol=None`` takes the steps one by one; a float evaluates the walk as a Chebyshev polynomial of the transition
    matrix within ``tol`` (module docstring), in about sqrt(2 steps ln(2 / tol)) applications of it.
    """
    walk = _Transition(affinity, mask, beta, offsets, probs.dtype)
    coef = chebyshev_power(steps, tol) if tol is not None else None
    if coef is None or len(coef) > steps:  # step by step is as cheap
        x = probs
        for _ in range(steps):
            x = walk.apply(x)
        return x.clone() if x is probs else x
    prev, cur = probs, walk.apply(probs)  # T_0 x, T_1 x
    out = probs * coef[0]
    if len(coef) > 1:
        out.add_(cur, alpha=coef[1])
    inv2 = 2 * walk.inv
    for k in range(2, len(coef)):
        nxt = walk.apply(cur, inv2).sub_(prev)  # T_k = 2 P T_(k-1) - T_(k-2)
        if coef[k]:
            out.add_(nxt, alpha=coef[k])
        prev, cur = cur, nxt
    # p(1) = sum(coef) = 1 - (the dropped tail): divide it out, so that the series keeps what P keeps (a constant
    # region, the total of each class), and the pixels outside the mask exactly as they were
    return torch.where(mask[:, None], out.div_(sum(coef)), probs)


def item_mask(labels, background=0):
    """The pixels of (B, H, W) ``labels`` that walk: those not labelled ``background`` (``None``: every pixel)."""
    return torch.ones_like(labels, dtype=torch.bool) if background is None else labels != background


def name_items(walked, labels, mask, background=0):
    """``labels`` outside ``mask``, inside it the best item class of the (B, K, H, W) ``walked`` probabilities (whose
    background channel this overwrites)."""
    walked[:, background] = -1  # an item pixel takes an item class
    return torch.where(mask, walked.argmax(1), labels)


def walked_labels(probs, affinity, beta, steps, background=0, offsets=NEIGHBOURS, tol=None):
    """Label maps (B, H, W): the segmentor's background where its argmax is background, elsewhere the best item class
    of ``random_walk`` over the pixels it calls an item (``background=None``: every pixel walks and takes the best
    class of the walk)."""
    labels = probs.argmax(1)
    mask = item_mask(labels, background)
    walked = random_walk(probs, affinity, mask, beta, steps, offsets, tol)
    return walked.argmax(1) if background is None else name_items(walked, labels, mask, background)
