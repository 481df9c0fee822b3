"""Point-cloud tokenizer: farthest point sampling, kNN grouping, neighbourhood embedding, Morton ordering.

The grouping follows PCT's "neighbor embedding" (Guo et al., "PCT: Point Cloud Transformer", Computational
Visual Media 2021, https://arxiv.org/abs/2012.09688; official code MenghaoGuo/PCT): a point-wise embedding, then
two sample-and-group (SG) stages, each of which picks centres by farthest point sampling (Qi et al.,
PointNet++, NeurIPS 2017), gathers the k nearest neighbours of every centre, concatenates
``(f_neighbour - f_centre, f_centre)``, applies two Linear-BN-ReLU layers and max-pools over the neighbours.

Two things differ from the official code, both so that the result depends only on the geometry:

* The order of the input points is made canonical first (lexicographic order of the rows), so farthest point
  sampling starts from a point chosen by the geometry (the one farthest from the centroid, ties going to the
  lexicographically smallest) and every tie (in sampling and in kNN) is broken by coordinates, never by the
  position of a point in the input. A model built on this tokenizer is invariant to permutations of its input.
* The tokens (the last stage's centres) are ordered along a Morton (Z-order) curve of their coordinates, so
  mixers that see token positions (``ff``) get a canonical, spatially coherent order.

All functions are batched over B and vectorised over points; only farthest point sampling iterates, once per
centre.
"""
import torch
import torch.nn as nn

# kNN breaks distance ties exactly by packing (distance bits, rank) into one int64 key; the rank takes this
# many low bits, which caps the reference set at 2**24 points.
_RANK_BITS = 24


def index_points(x, idx):
    """Gather rows of ``x`` per batch element by index arithmetic on the flattened tensor.

    Args:
        x: (B, N, C) values.
        idx: (B, ...) long indices into N.

    Returns:
        (B, ..., C) gathered values.
    """
    B, N, C = x.shape
    offset = torch.arange(B, device=x.device).view((B,) + (1,) * (idx.ndim - 1)) * N
    return x.reshape(B * N, C)[(idx + offset).reshape(-1)].view(*idx.shape, C)


def lexsort(x):
    """Indices that sort the rows of every cloud lexicographically (first column most significant).

    Args:
        x: (B, N, D) rows.

    Returns:
        (B, N) long permutation; ``index_points(x, lexsort(x))`` is the same tensor for any row order of ``x``
        (rows that compare equal are identical, so their relative order does not matter).
    """
    B, N, D = x.shape
    order = torch.arange(N, device=x.device).expand(B, N)
    for col in reversed(range(D)):  # least significant key first; stable sorts keep earlier keys' order
        key = torch.gather(x[..., col], 1, order)
        order = torch.gather(order, 1, torch.sort(key, dim=1, stable=True).indices)
    return order


def farthest_point_sample(xyz, num_samples, canonical=False):
    """Farthest point sampling, batched over B and vectorised over N.

    The first centre is the point farthest from the centroid; each next one is the point farthest from the
    centres chosen so far. Ties go to the lexicographically smallest point (or, with ``canonical=True``, to the
    first in the given order, which the caller guarantees is canonical).

    Args:
        xyz: (B, N, 3) coordinates.
        num_samples: Number of centres M (at most N).
        canonical: The rows of ``xyz`` are already in a canonical order (skips the lexicographic sort).

    Returns:
        (B, M) long indices into N, in sampling order.
    """
    B, N, _ = xyz.shape
    if num_samples > N:
        raise ValueError(f"farthest_point_sample: cannot pick {num_samples} centres from {N} points; feed at least "
                         f"{num_samples} points or sample fewer centres")
    with torch.no_grad():
        order = None if canonical else lexsort(xyz)
        pts = xyz if canonical else index_points(xyz, order)
        pts = pts.detach().float().transpose(1, 2).contiguous()  # (B, 3, N): contiguous rows, 3x faster per step
        centroid = pts.mean(dim=2, keepdim=True)  # summed in canonical order: the same for any input order
        far = (pts - centroid).square().sum(1).argmax(dim=1)  # argmax returns the first maximum: ties by rank
        dist = torch.full((B, N), float("inf"), device=xyz.device)
        idx = torch.empty((B, num_samples), dtype=torch.long, device=xyz.device)
        for i in range(num_samples):
            idx[:, i] = far
            centre = torch.gather(pts, 2, far.view(B, 1, 1).expand(B, 3, 1))  # (B, 3, 1)
            torch.minimum(dist, (pts - centre).square_().sum(1), out=dist)  # (B, N)
            far = dist.argmax(dim=1)
        return idx if canonical else torch.gather(order, 1, idx)


def square_distance(a, b):
    """Squared Euclidean distances (B, M, N) between (B, M, 3) and (B, N, 3), never negative."""
    d = torch.baddbmm(b.square().sum(-1).unsqueeze(1), a, b.transpose(1, 2), alpha=-2)  # (B, M, N)
    return d.add_(a.square().sum(-1).unsqueeze(2)).clamp_min_(0).add_(0.0)  # +0.0 turns -0.0 into +0.0


def knn(query, ref, k, canonical=False):
    """The k nearest reference points of every query point (by torch distance matrix + top-k).

    Ties are broken exactly by rank (the lexicographic order of the reference points, or their given order with
    ``canonical=True``), so the chosen set and its order depend only on the coordinates. A float top-k of k + 1
    finds the rows whose k-th and (k+1)-th distances tie; only those rows are re-ranked by an exact int64 key
    packing the distance's bit pattern (monotonic for non-negative floats) above the rank.

    Args:
        query: (B, M, 3) query coordinates.
        ref: (B, N, 3) reference coordinates.
        k: Neighbours per query (at most N).
        canonical: ``ref`` is already in a canonical order (skips the lexicographic sort).

    Returns:
        (B, M, k) long indices into N, nearest first.
    """
    B, N, _ = ref.shape
    if k > N:
        raise ValueError(f"knn: k={k} neighbours requested but the reference set has only {N} points")
    if N >= 2 ** _RANK_BITS:
        raise ValueError(f"knn: {N} reference points exceed the {2 ** _RANK_BITS} this tie-breaking supports")
    with torch.no_grad():
        order = None if canonical else lexsort(ref)
        pts = ref if canonical else index_points(ref, order)
        d = square_distance(query.detach().float(), pts.detach().float())  # (B, M, N)
        vals, idx = torch.topk(d, min(k + 1, N), dim=-1, largest=False, sorted=True)  # (B, M, k+1)
        if k < N:
            tied = vals[..., k - 1] == vals[..., k]  # (B, M): the k-th place is shared
            if tied.any():
                rows = _rank_key(d[tied])  # (R, N)
                exact = torch.topk(rows, k, dim=-1, largest=False, sorted=True).indices
                idx = idx[..., :k].clone()
                idx[tied] = exact
                vals = torch.gather(d, 2, idx)
            idx, vals = idx[..., :k], vals[..., :k]
        # Within the k, order by (distance, rank): a small sort of the packed keys.
        idx = torch.gather(idx, 2, torch.sort(_rank_key(vals, idx), dim=-1).indices)
        return idx if canonical else index_points(order.unsqueeze(-1), idx).squeeze(-1)


def _rank_key(d, rank=None):
    """int64 keys ordering non-negative float32 distances ``d`` by value, then by ``rank`` (default: position)."""
    if rank is None:
        rank = torch.arange(d.shape[-1], device=d.device)
    return (d.contiguous().view(torch.int32).long() << _RANK_BITS) | rank


def morton_order(xyz, bits=10):
    """Indices that order points along a Morton (Z-order) curve of their coordinates.

    Coordinates are quantised to ``2**bits`` cells per axis in each cloud's bounding cube; points sharing a cell
    keep their given order (stable sort), so the result depends on that order only among such points.

    Args:
        xyz: (B, M, 3) coordinates.
        bits: Bits per axis (at most 20).

    Returns:
        (B, M) long permutation.
    """
    with torch.no_grad():
        lo = xyz.amin(dim=1, keepdim=True)
        extent = (xyz.amax(dim=1, keepdim=True) - lo).amax(dim=-1, keepdim=True).clamp_min(1e-12)
        cells = (2 ** bits) - 1
        q = ((xyz - lo) / extent * cells).round().long().clamp_(0, cells)  # (B, M, 3) integer cells
        code = torch.zeros_like(q[..., 0])
        for bit in range(bits):  # interleave bits: x most significant within each triple
            for axis in range(3):
                code |= ((q[..., axis] >> bit) & 1) << (3 * bit + 2 - axis)
        return torch.sort(code, dim=1, stable=True).indices


class LinearBN(nn.Module):
    """Linear (no bias) -> BatchNorm over channels -> ReLU, on channels-last tensors of any rank."""

    def __init__(self, in_dim, out_dim, act=True):
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim, bias=False)
        self.bn = nn.BatchNorm1d(out_dim)
        self.act = nn.ReLU(inplace=True) if act else nn.Identity()

    def forward(self, x):
        shape = x.shape
        x = self.bn(self.linear(x).reshape(-1, self.linear.out_features))  # (rows, C_out)
        return self.act(x).view(*shape[:-1], -1)


class SampleGroup(nn.Module):
    """One PCT sample-and-group stage: FPS centres, kNN neighbours, ``(f_j - f_i, f_i)`` -> 2 x Linear-BN-ReLU ->
    max over the neighbours.

    The first Linear of ``cat(f_j - f_i, f_i)`` equals ``W1 f_j + (W2 - W1) f_i``; it is evaluated on the N
    points and the M centres before gathering, k times fewer rows than on the grouped tensor.

    Args:
        in_dim: Feature width C of the input points.
        out_dim: Output width (PCT: 2C).
        num_samples: Centres M.
        k: Neighbours per centre.
    """

    def __init__(self, in_dim, out_dim, num_samples, k):
        super().__init__()
        self.num_samples, self.k = num_samples, k
        self.proj_neighbour = nn.Linear(in_dim, out_dim, bias=False)  # W1, on f_j
        self.proj_centre = nn.Linear(in_dim, out_dim, bias=False)  # W2 - W1, on f_i
        self.bn1 = nn.BatchNorm1d(out_dim)
        self.conv2 = LinearBN(out_dim, out_dim)

    def forward(self, xyz, feats):
        """(B, N, 3), (B, N, C) in canonical order -> centres (B, M, 3), features (B, M, C_out), FPS order."""
        B, N, _ = xyz.shape
        if N < self.num_samples:
            raise ValueError(f"point grouping: got {N} points but this stage samples {self.num_samples} centres; "
                             f"feed at least {self.num_samples} points (or build the model with fewer centres: "
                             f"num_points=/stages=)")
        centre_idx = farthest_point_sample(xyz, self.num_samples, canonical=True)  # (B, M)
        centres = index_points(xyz, centre_idx)  # (B, M, 3)
        nbr_idx = knn(centres, xyz, self.k, canonical=True)  # (B, M, k)
        h = index_points(self.proj_neighbour(feats), nbr_idx)  # (B, M, k, C_out)
        h = h + self.proj_centre(index_points(feats, centre_idx)).unsqueeze(2)
        C = h.shape[-1]
        h = torch.relu(self.bn1(h.reshape(-1, C))).view(B, self.num_samples, self.k, C)
        return centres, self.conv2(h).amax(dim=2)  # (B, M, C_out)


class PointTokenizer(nn.Module):
    """Points (B, N, in_dims) -> tokens (B, M, embed_dim) on Morton-ordered centres (PCT neighbour embedding).

    Pipeline: canonical (lexicographic) order -> point embedding (2 x Linear-BN-ReLU, width ``widths[0]``) ->
    SG stages (centres ``stages[i]``, width ``widths[i+1]``, k neighbours) -> Morton order of the last centres ->
    Linear to ``embed_dim`` + an MLP position embedding of the centre coordinates.

    Args:
        in_dims: 3 (xyz) or 6 (xyz + normals); the first three are coordinates.
        embed_dim: Token width of the trunk.
        stages: Centres per SG stage (PCT: 512, 256 for 1024 points).
        k: Neighbours per centre (PCT: 32).
        widths: Point embedding width then one width per stage (PCT: 64, 128, 256).
    """

    def __init__(self, in_dims=3, embed_dim=192, stages=(512, 256), k=32, widths=(64, 128, 256)):
        super().__init__()
        stages, widths = tuple(stages), tuple(widths)
        if len(widths) != len(stages) + 1:
            raise ValueError(f"PointTokenizer: widths needs one entry for the point embedding plus one per stage "
                             f"({len(stages) + 1}), got {widths}")
        if any(b > a for a, b in zip(stages, stages[1:])):
            raise ValueError(f"PointTokenizer: stages must not grow (each samples from the previous), got {stages}")
        if in_dims < 3:
            raise ValueError(f"PointTokenizer: in_dims must be at least 3 (xyz first), got {in_dims}")
        self.in_dims, self.stages, self.k = in_dims, stages, k
        self.num_tokens = stages[-1]
        self.point_embed = nn.Sequential(LinearBN(in_dims, widths[0]), LinearBN(widths[0], widths[0]))
        self.groups = nn.ModuleList(SampleGroup(widths[i], widths[i + 1], m, k) for i, m in enumerate(stages))
        self.proj = nn.Linear(widths[-1], embed_dim)
        self.pos_embed = nn.Sequential(nn.Linear(3, 128), nn.GELU(), nn.Linear(128, embed_dim))

    def check(self, points):
        """Raise a clear error for a point tensor the tokenizer cannot take."""
        if points.ndim != 3:
            raise ValueError(f"points must be a (B, N, {self.in_dims}) tensor, got shape {tuple(points.shape)}")
        if points.shape[-1] != self.in_dims:
            what = {3: "xyz", 6: "xyz + normals"}.get(self.in_dims, "xyz + features")
            raise ValueError(f"points have {points.shape[-1]} values per point (shape {tuple(points.shape)}) but "
                             f"this model takes in_dims={self.in_dims} ({what}); build it with "
                             f"in_dims={points.shape[-1]} or feed (B, N, {self.in_dims}) points")
        if points.shape[1] < self.stages[0]:
            raise ValueError(f"points: got {points.shape[1]} points per cloud but the tokenizer samples "
                             f"{self.stages[0]} centres; feed at least {self.stages[0]} points or build the model "
                             f"with num_points={points.shape[1]} (or smaller stages=)")

    def forward(self, points):
        """Tokenize a batch of clouds.

        Args:
            points: (B, N, in_dims).

        Returns:
            ``tokens`` (B, M, embed_dim) and ``centres`` (B, M, 3) in Morton order, ``point_feats``
            (B, N, widths[0]) in the input order, and ``levels``: ``(centres, features)`` of every stage before the
            last, in their canonical (sampling) order (for dense heads).
        """
        self.check(points)
        point_feats = self.point_embed(points)  # (B, N, C0), point-wise: follows the input order
        order = lexsort(points)  # canonical order: everything below is the same for any input permutation
        xyz, feats = index_points(points[..., :3].contiguous(), order), index_points(point_feats, order)
        levels = []
        for group in self.groups:
            xyz, feats = group(xyz, feats)
            levels.append((xyz, feats))
        curve = morton_order(xyz)  # (B, M)
        xyz, feats = index_points(xyz, curve), index_points(feats, curve)
        return self.proj(feats) + self.pos_embed(xyz), xyz, point_feats, levels[:-1]


def interpolate(xyz, centres, feats, k=3, eps=1e-8):
    """Per-point features from the k nearest centres, weighted by inverse squared distance (PointNet++ feature
    propagation).

    Args:
        xyz: (B, N, 3) target points.
        centres: (B, M, 3) source points.
        feats: (B, M, C) source features.

    Returns:
        (B, N, C) interpolated features.
    """
    idx = knn(xyz, centres, k, canonical=True)  # (B, N, k)
    d = (xyz.unsqueeze(2) - index_points(centres, idx)).square().sum(-1)  # (B, N, k)
    w = 1.0 / (d + eps)
    w = w / w.sum(-1, keepdim=True)
    return (index_points(feats, idx) * w.unsqueeze(-1)).sum(dim=2)
