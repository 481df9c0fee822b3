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


def resize_argmax(logits, size, align_corners=False, rows=None, cols=None, block_elems=1 << 22, rtol=1e-5,
                  dense_fraction=0.05):
    """``F.interpolate(logits, size, mode="bilinear", align_corners=...).argmax(1)`` without the resized logits.

    Args:
        logits: (B, K, h, w) float scores, any memory layout (channels-last reads fastest).
        size: Output size (H, W) of the resize.
        align_corners: As in ``F.interpolate``.
        rows, cols: Optional ``(start, stop)`` windows of the resized grid to label (default: all of it), e.g. to drop
            padding: the result is the window of the full label map.
        block_elems: Source cells x classes handled per step (bounds the working memory).
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
    # candidates and its best corner (the label of a cell with one candidate).
    n_cand = torch.empty(B, len(cy), len(cx), dtype=torch.long, device=dev)
    best = torch.empty_like(n_cand)
    band = max(1, block_elems // (B * len(cx) * K))
    for a in range(0, len(cy), band):
        band_rows = (cy[a:a + band], cy1[a:a + band])
        hi = _pair(_pair(x, 1, *band_rows, torch.maximum), 2, cx, cx1, torch.maximum)  # (B, n, m, K) corner maxima
        lo = _pair(_pair(x, 1, *band_rows, torch.minimum), 2, cx, cx1, torch.minimum)
        n_cand[:, a:a + band] = (hi >= _bound(lo, hi, rtol)).sum(dim=-1)
        best[:, a:a + band] = hi.argmax(dim=-1)
    out = best[:, ry[:, None], rx]  # each pixel takes its cell's best corner: right where the cell has one candidate
    multi = n_cand > 1
    if not bool(multi.any()):
        return out
    # Pass 2: the pixels of cells with several candidates interpolate those candidates only. Where that is most of
    # the work of a plain resize (near-uniform logits), the plain resize is cheaper.
    row_n, col_n = torch.bincount(ry, minlength=len(cy)), torch.bincount(rx, minlength=len(cx))  # pixels per cell
    if int((n_cand * (row_n[:, None] * col_n))[multi].sum()) > dense_fraction * out.numel() * K:
        resized = torch.nn.functional.interpolate(logits.detach(), size=size, mode="bilinear",
                                                  align_corners=align_corners)
        return resized[:, :, r0:r1, c0:c1].argmax(dim=1)
    row_0, col_0 = row_n.cumsum(0) - row_n, col_n.cumsum(0) - col_n  # first output row / column of each cell
    cb, ci, cj = multi.nonzero().unbind(1)  # (M,) cells with several candidates
    corners = torch.stack((x[cb, cy[ci], cx[cj]], x[cb, cy[ci], cx1[cj]], x[cb, cy1[ci], cx[cj]],
                           x[cb, cy1[ci], cx1[cj]]))  # (4, M, K)
    hi = corners.amax(dim=0)
    count = n_cand[cb, ci, cj]
    # Cells are grouped by candidate count (2, 3-4, 5-8, ...) so that padding to a group's widest cell stays < 2x.
    c_lo = 1
    while c_lo < int(count.max()):
        c_hi = min(2 * c_lo, K)
        cells = ((count > c_lo) & (count <= c_hi)).nonzero().squeeze(1)
        c_lo = c_hi
        if len(cells) == 0:
            continue
        cand = hi[cells].topk(c_hi, dim=-1, sorted=False).indices.sort(dim=-1).values  # (n, c), in class order
        vals = torch.gather(corners[:, cells], -1, cand.expand(4, -1, -1))  # (4, n, c)
        # the pixels of these cells, enumerated from each cell's block of rows and columns
        nr, nc = row_n[ci[cells]], col_n[cj[cells]]
        npix = nr * nc
        k = torch.repeat_interleave(torch.arange(len(cells), device=dev), npix)  # pixel -> cell of the group
        o = torch.arange(len(k), device=dev) - (npix.cumsum(0) - npix)[k]  # position inside the cell's block
        py, px, pb = row_0[ci[cells]][k] + o // nc[k], col_0[cj[cells]][k] + o % nc[k], cb[cells][k]
        # torch's separable order: along x within each source row, then along y.
        wx0p, wx1p, wy0p, wy1p = wx0[px, None], wx1[px, None], wy0[py, None], wy1[py, None]
        v = (vals[0, k] * wx0p + vals[1, k] * wx1p) * wy0p + (vals[2, k] * wx0p + vals[3, k] * wx1p) * wy1p
        out[pb, py, px] = torch.gather(cand[k], -1, v.argmax(dim=-1, keepdim=True)).squeeze(-1)
    return out


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
