"""Per-pixel labels of bilinearly resized logits, without the resized logits.

A segmentation head predicts K class scores at a stride (4 or 8 pixels); the label map is
``F.interpolate(logits, size, mode="bilinear").argmax(1)``. At 1024 px and K = 150 the resized tensor is 600 MB that
is written once and read once, for one integer per pixel: on a CPU this resize and argmax cost a third of a light-head
segmentor's inference (docs/BENCHMARKS.md).

``resize_argmax`` computes the same labels while touching only the classes that can win:

- an output pixel's bilinear value of class k is a convex combination of k's logits at the 2x2 source pixels around
  it (its *cell*), so it lies between their min and their max;
- the winning value at the pixel is at least ``lb = max_k min(corners of k)``, so a class whose corner max is below
  ``lb`` cannot win anywhere in the cell. The others are the cell's candidates (one in the interior of a region, two
  or three on a boundary): the top of the corner maxima;
- each pixel interpolates its cell's candidates only, with the same source indices and weights as torch's bilinear
  kernel, and takes the first maximum in class order (the tie rule of ``argmax``).

The bound is widened by a tolerance so that float rounding of the interpolation cannot exclude the winner. Labels then
match ``interpolate(...).argmax(1)`` except where two classes are within float rounding of each other (~1e-6
relative), where the two computations may round differently (as the NCHW and channels-last kernels of torch do).
"""
import torch

__all__ = ["resize_argmax", "source_index"]


def source_index(in_size, out_size, align_corners, device=None):
    """Bilinear source pixels of each output pixel along one axis, as torch computes them.

    Returns:
        ``(i0, i1, w0, w1)``: for output pixel j, ``value = w0[j] * x[i0[j]] + w1[j] * x[i1[j]]``; ``i1 = i0 + 1``
        except at the last source pixel.
    """
    dst = torch.arange(out_size, dtype=torch.float32, device=device)
    if align_corners:
        scale = (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
        src = dst * torch.tensor(scale, dtype=torch.float32)
    else:  # pixel centres, clamped at the first pixel (torch's area_pixel_compute_source_index for linear modes)
        scale = torch.tensor(in_size / out_size, dtype=torch.float32)
        src = (scale * (dst + 0.5) - 0.5).clamp_(min=0)
    i0 = src.floor().long().clamp_(max=in_size - 1)
    w1 = (src - i0).clamp_(0, 1)
    i1 = (i0 + 1).clamp_(max=in_size - 1)
    return i0, i1, 1 - w1, w1


def resize_argmax(logits, size, align_corners=False, rows=None, cols=None, block_elems=1 << 20, rtol=1e-5,
                  dense_fraction=0.05):
    """``F.interpolate(logits, size, mode="bilinear", align_corners=...).argmax(1)`` without the resized logits.

    Args:
        logits: (B, K, h, w) float scores, any memory layout (channels-last reads fastest).
        size: Output size (H, W) of the resize.
        align_corners: As in ``F.interpolate``.
        rows, cols: Optional ``(start, stop)`` windows of the resized grid to label (default: all of it), e.g. to drop
            padding: the result is the window of the full label map.
        block_elems: Source cells x classes handled per step (bounds the working memory; 2^20, 4 MB of float32
            corners, measured 1.1-1.4x faster than 2^22 on an AVX2 EPYC at 1024-2048 px: the bands stay in
            cache). The candidate masks kept for pass 2 add at most one byte per source cell and class.
        dense_fraction: Above this share of a plain resize's work, the plain resize runs instead.
        rtol: Relative widening of the candidate bound (covers float rounding; larger only costs time).

    Returns:
        (B, rows, cols) int64 labels.
    """
    if logits.dim() != 4:
        raise ValueError(f"resize_argmax expects (B, K, h, w) logits, got shape {tuple(logits.shape)}")
    B, K, h, w = logits.shape
    H, W = size
    r0, r1 = rows if rows is not None else (0, H)
    c0, c1 = cols if cols is not None else (0, W)
    if not (0 <= r0 <= r1 <= H and 0 <= c0 <= c1 <= W):
        raise ValueError(f"windows rows={rows}, cols={cols} do not fit the output size {tuple(size)}")
    if (h, w) == (H, W):  # same size: the resize is the identity (weights 1 and 0)
        return logits[:, :, r0:r1, c0:c1].argmax(dim=1)
    if logits.device.type != "cpu":
        # Off the CPU the plain resize is two kernels, while the candidate passes below are many small ones with
        # host synchronisations: they save memory traffic that a GPU's bandwidth makes cheap (docs/BENCHMARKS.md,
        # "On a GPU").
        return _dense(logits, size, align_corners, rows=(r0, r1), cols=(c0, c1))
    dev = logits.device
    y0, y1, wy0, wy1 = (t[r0:r1] for t in source_index(h, H, align_corners, dev))
    x0, x1, wx0, wx1 = (t[c0:c1] for t in source_index(w, W, align_corners, dev))
    out = torch.empty(B, r1 - r0, c1 - c0, dtype=torch.long, device=dev)
    if out.numel() == 0:
        return out
    x = logits.detach().float().permute(0, 2, 3, 1)  # (B, h, w, K): a view, contiguous for channels-last input

    # Cells: a pixel's 2x2 source corners are rows (y0, y1) x cols (x0, x1); one cell per distinct (y0, x0).
    cy, cx = torch.unique(y0), torch.unique(x0)  # sorted; pixels map to them with searchsorted
    ry, rx = torch.searchsorted(cy, y0), torch.searchsorted(cx, x0)  # output row / column -> cell row / column
    cy1, cx1 = y1[torch.searchsorted(y0, cy)], x1[torch.searchsorted(x0, cx)]  # the other source row / column

    # Pass 1, in bands of cell rows (the corner tensors are (B, band, cells per row, K)): each cell's number of
    # candidates and its best corner (the label of a cell with one candidate); for the cells with several, their
    # coordinates and candidate masks (M, K), which pass 2 reads instead of gathering the corners again.
    n_cand = torch.empty(B, len(cy), len(cx), dtype=torch.long, device=dev)
    best = torch.empty_like(n_cand)
    band = max(1, block_elems // (B * len(cx) * K))
    multi_cells, multi_masks = [], []
    for a in range(0, len(cy), band):
        band_rows = (cy[a:a + band], cy1[a:a + band])
        hi = _pair(_pair(x, 1, *band_rows, torch.maximum), 2, cx, cx1, torch.maximum)  # (B, n, m, K) corner maxima
        lo = _pair(_pair(x, 1, *band_rows, torch.minimum), 2, cx, cx1, torch.minimum)
        cand = hi >= _bound(lo, hi, rtol)
        n_cand[:, a:a + band] = count = cand.view(torch.uint8).sum(dim=-1, dtype=torch.int32)  # 2x a bool sum
        best[:, a:a + band] = hi.argmax(dim=-1)
        several = count > 1
        if bool(several.any()):
            where = several.nonzero()  # (m, 3): batch, row in the band, column
            where[:, 1] += a
            multi_cells.append(where)
            multi_masks.append(cand[several])
    # Each pixel takes its cell's best corner (right where the cell has one candidate). A cell's pixels are a run of
    # consecutive rows and columns (ry, rx ascend), so this is each cell's value repeated over its block.
    row_n, col_n = torch.bincount(ry, minlength=len(cy)), torch.bincount(rx, minlength=len(cx))  # pixels per cell
    out = _repeat_runs(_repeat_runs(best, row_n, 1), col_n, 2)
    if not multi_cells:
        return out
    # Pass 2: the pixels of cells with several candidates interpolate those candidates only. Where that is most of
    # the work of a plain resize (near-uniform logits), the plain resize is cheaper.
    cb, ci, cj = torch.cat(multi_cells).unbind(1)  # (M,) cells with several candidates
    count = n_cand[cb, ci, cj]
    if int((count * row_n[ci] * col_n[cj]).sum()) > dense_fraction * out.numel() * K:
        return _dense(logits, size, align_corners, rows=(r0, r1), cols=(c0, c1))
    masks = torch.cat(multi_masks)  # (M, K): each cell's candidates
    row_0, col_0 = row_n.cumsum(0) - row_n, col_n.cumsum(0) - col_n  # first output row / column of each cell
    rows_, cols_ = (cy[ci], cy1[ci]), (cx[cj], cx1[cj])  # each cell's source rows (upper, lower) and columns
    cell_rows, cell_cols = row_n[ci], col_n[cj]  # each cell's block of output pixels: rows x columns
    first_row, first_col = row_0[ci], col_0[cj]
    wide = int(cell_cols.max()) + 1
    shape_key = cell_rows * wide + cell_cols  # one integer per block shape (torch.unique(dim=0) is slow on CPU)
    # Cells are grouped by candidate count (2, 3-4, 5-8, ...) so that padding to a group's widest cell stays < 2x, and
    # within a group by the shape of their pixel block (one shape inside the image for an integer scale, a few more
    # at its borders), so that a group's pixels are one (cells, rows, columns, candidates) tensor made by
    # broadcasting its cells' corners against their rows' and columns' weights.
    flat = x.contiguous().view(-1)  # (B * h * w * K,): pass 2 reads values by flat index (a view if channels-last)
    c_lo = 1
    while c_lo < int(count.max()):
        c_hi = min(2 * c_lo, K)
        group = (count > c_lo) & (count <= c_hi)
        c_lo = c_hi
        if not bool(group.any()):
            continue
        for key in shape_key[group].unique().tolist():
            nr, nc = divmod(key, wide)
            cells = (group & (shape_key == key)).nonzero().squeeze(1)
            step = max(1, block_elems // (nr * nc * c_hi))  # cells per step: bounds the (cells, nr, nc, c) tensor
            for start in range(0, len(cells), step):
                _label_block(out, cells[start:start + step], nr, nc, c_hi, masks, count, flat, (h, w, K),
                             (cb, rows_, cols_), first_row, first_col, (wy0, wy1, wx0, wx1))
    return out


def _dense(logits, size, align_corners, rows, cols):
    """The plain computation: the resized logits' window, then the argmax over classes."""
    resized = torch.nn.functional.interpolate(logits.detach(), size=size, mode="bilinear", align_corners=align_corners)
    return resized[:, :, rows[0]:rows[1], cols[0]:cols[1]].argmax(dim=1)


def _label_block(out, cells, nr, nc, c, masks, count, flat, hwk, sources, first_row, first_col, weights):
    """Label the pixels of ``cells`` (all with an ``nr`` x ``nc`` block of output pixels and at most ``c``
    candidates, marked in their rows of ``masks``) from their candidates' values at the cells' four source corners
    (read from ``flat``, the (B, h, w, K) scores flattened, ``hwk = (h, w, K)``, at ``sources``: each cell's batch
    index, source rows and columns), in torch's separable order: along x within each source row, then along y (the
    same products and sums as ``F.interpolate``).

    Values are read and labels written through flat indices (``take``, ``index_copy_``): one index per element
    instead of the four (or three) broadcast index tensors of advanced indexing, 2.5-4x faster here."""
    wy0, wy1, wx0, wx1 = weights
    cb, rows, cols = sources
    H, W = out.shape[1:]
    h, w, K = hwk
    cand = _candidates(masks[cells], count[cells], c)  # (n, c), in class order
    b = cb[cells]
    # vals: the (n, 1, c) values at the upper-left, upper-right, lower-left and lower-right corners
    vals = [flat.take(((b * h + rows[r][cells]) * w + cols[q][cells])[:, None] * K + cand)[:, None]
            for r in (0, 1) for q in (0, 1)]
    ys = first_row[cells, None] + torch.arange(nr, device=cells.device)  # (n, nr) output rows
    xs = first_col[cells, None] + torch.arange(nc, device=cells.device)  # (n, nc) output columns
    wx0p, wx1p = wx0[xs, None], wx1[xs, None]  # (n, nc, 1)
    top = vals[0] * wx0p + vals[1] * wx1p  # (n, nc, c): along x in the upper source row
    bottom = vals[2] * wx0p + vals[3] * wx1p
    v = top[:, None] * wy0[ys, None, None] + bottom[:, None] * wy1[ys, None, None]  # (n, nr, nc, c)
    labels = torch.gather(cand, -1, _first_argmax(v).view(len(cells), nr * nc))  # (n, nr * nc)
    where = (b[:, None, None] * H + ys[:, :, None]) * W + xs[:, None, :]  # (n, nr, nc) flat output indices
    out.view(-1).index_copy_(0, where.view(-1), labels.view(-1))


def _candidates(mask, count, c):
    """(n, c) class indices of each row's True entries of ``mask`` (n, K), at most ``c`` per row, in class order; a row
    with fewer repeats its first candidate at the end (a repeated class cannot change the first maximum's class)."""
    row, cls = mask.nonzero().unbind(1)  # row-major: each row's classes in order
    start = count.cumsum(0) - count  # each row's first entry in ``cls``
    cand = cls[start].unsqueeze(1).repeat(1, c)
    cand[row, torch.arange(len(row), device=mask.device) - start[row]] = cls
    return cand


def _repeat_runs(t, counts, dim, max_runs=8):
    """``t.repeat_interleave(counts, dim)`` written as one broadcast copy per run of equal counts (a resize by an
    integer factor has three: the first cell, the interior, the last cell), 5x faster than the index that
    ``repeat_interleave`` builds for tensor counts; that index where the counts have more than ``max_runs`` runs."""
    change = (counts[1:] != counts[:-1]).nonzero().squeeze(1) + 1
    if len(change) >= max_runs:
        return t.repeat_interleave(counts, dim=dim)
    starts = [0] + change.tolist() + [len(counts)]
    shape = list(t.shape)
    shape[dim] = int(counts.sum())
    out = t.new_empty(shape)
    at = 0
    for a, b in zip(starts[:-1], starts[1:]):
        n, r = b - a, int(counts[a])
        src = t.narrow(dim, a, n).unsqueeze(dim + 1)
        size = list(src.shape)
        size[dim + 1] = r
        out.narrow(dim, at, n * r).view(*shape[:dim], n, r, *shape[dim + 1:]).copy_(src.expand(size))
        at += n * r
    return out


def _first_argmax(v, loop_max=8):
    """``v.argmax(dim=-1)`` (the first maximum) for the few candidates of a cell: for up to ``loop_max`` of them a
    running comparison over the candidates, whose strict ``>`` keeps the first of equal values (torch's argmax
    over a short last axis is a reduction per element, 10x slower here); otherwise ``argmax``."""
    c = v.shape[-1]
    if c > loop_max:
        return v.argmax(dim=-1)
    best_v, best_i = v[..., 0], torch.zeros(v.shape[:-1], dtype=torch.long, device=v.device)
    for k in range(1, c):
        better = v[..., k] > best_v
        best_v = torch.where(better, v[..., k], best_v)
        best_i.masked_fill_(better, k)
    return best_i


def _bound(lo, hi, rtol):
    """The least value the winner can have in each cell (the best corner minimum), widened for float rounding."""
    scale = torch.maximum(hi.amax(dim=-1, keepdim=True), -lo.amin(dim=-1, keepdim=True)).abs_()  # max |corner|
    return lo.amax(dim=-1, keepdim=True) - rtol * (1 + scale)


def _pair(x, dim, i0, i1, op):
    """``op(x.index_select(dim, i0), x.index_select(dim, i1))``, reading views where the indices allow.

    A resize that enlarges (the usual case) has ``i0`` a run of consecutive source indices and ``i1 = i0 + 1`` except
    where both are clamped to the last one; then the pair is two shifted views and only the clamped end is copied.
    """
    n, s = len(i0), int(i0[0])
    if int(i0[-1]) - s + 1 == n:
        shifted = int((i1 == i0 + 1).sum())
        if shifted == n:
            return op(x.narrow(dim, s, n), x.narrow(dim, s + 1, n))
        if shifted == n - 1 and int(i1[-1]) == int(i0[-1]) and bool((i1[:-1] == i0[:-1] + 1).all()):
            shape = list(x.shape)
            shape[dim] = n
            out = x.new_empty(shape)
            op(x.narrow(dim, s, n - 1), x.narrow(dim, s + 1, n - 1), out=out.narrow(dim, 0, n - 1))
            out.narrow(dim, n - 1, 1).copy_(x.narrow(dim, s + n - 1, 1))
            return out
    return op(x.index_select(dim, i0), x.index_select(dim, i1))
