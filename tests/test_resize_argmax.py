"""``zoo.layers.resize_argmax``: labels of bilinearly resized logits without the resized logits, against
``F.interpolate(...).argmax(1)`` and a hand-computed case."""
import pytest
import torch
import torch.nn.functional as F

from zoo.layers.resize_argmax import resize_argmax, source_index


def assert_labels_of(resized, labels, rtol=1e-5):
    """``labels`` is ``resized.argmax(1)`` wherever the top two classes are apart by more than float rounding, and a
    maximiser (to rounding) everywhere."""
    top2 = resized.topk(2, dim=1).values
    scale = 1 + resized.abs().amax(dim=1)
    clear = (top2[:, 0] - top2[:, 1]) > rtol * scale
    expected = resized.argmax(1)
    assert labels.shape == expected.shape and labels.dtype == torch.long
    assert torch.equal(labels[clear], expected[clear])
    chosen = resized.gather(1, labels[:, None])[:, 0]
    assert bool(((top2[:, 0] - chosen) <= rtol * scale).all())


def test_by_hand():
    # one row of two source pixels, 4 output pixels: class 0 goes 0 -> 1, class 1 is 0.6 everywhere.
    # align_corners=False puts the outputs at source positions -0.25 (clamped to 0), 0.25, 0.75, 1.25 (clamped to 1):
    # class 0 reads 0, 0.25, 0.75, 1, so class 1 wins the first two and class 0 the last two.
    x = torch.tensor([[0.0, 1.0], [0.6, 0.6]]).view(1, 2, 1, 2)
    assert resize_argmax(x, (1, 4)).tolist() == [[[1, 1, 0, 0]]]
    i0, i1, w0, w1 = source_index(2, 4, align_corners=False)
    assert i0.tolist() == [0, 0, 0, 1] and i1.tolist() == [1, 1, 1, 1]
    assert w1.tolist() == [0.0, 0.25, 0.75, 0.25]  # the last one splits 0.75/0.25 between pixel 1 and itself
    # align_corners=True: positions 0, 1/3, 2/3, 1 -> class 0 reads 0, 1/3, 2/3, 1: labels 1, 1, 0, 0
    assert resize_argmax(x, (1, 4), align_corners=True).tolist() == [[[1, 1, 0, 0]]]


SHAPES = [
    ((2, 5, 7, 9), (28, 36)),      # x4, batch of 2
    ((1, 150, 16, 16), (64, 64)),  # ADE20K's class count
    ((1, 20, 13, 17), (50, 61)),   # non-integer scales
    ((1, 6, 20, 20), (7, 9)),      # shrinking
    ((1, 3, 1, 1), (4, 4)),        # a single source pixel
    ((1, 4, 5, 1), (9, 3)),        # one source column
]


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape,size", SHAPES)
def test_matches_interpolate_then_argmax(shape, size, align_corners):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    resized = F.interpolate(x, size=size, mode="bilinear", align_corners=align_corners)
    assert_labels_of(resized, resize_argmax(x, size, align_corners))


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape,size", SHAPES + [((2, 7, 9, 11), (70, 90))])  # + a batch of 2 at a x10 / x8.2 scale
def test_candidate_path_for_every_block_shape(shape, size, align_corners):
    """Random logits mostly take the plain resize; here the candidate path is forced (``dense_fraction=1.0``) and
    cut into steps of a cell or a few (``block_elems=64``), so that cells of every block shape (the image's inside,
    its first and last rows and columns, uneven blocks of a non-integer scale) and both batch entries go through
    it; also on a window of the output."""
    torch.manual_seed(0)
    x = torch.randn(*shape)
    resized = F.interpolate(x, size=size, mode="bilinear", align_corners=align_corners)
    labels = resize_argmax(x, size, align_corners, dense_fraction=1.0, block_elems=64)
    assert_labels_of(resized, labels)
    rows, cols = (1, max(1, size[0] - 2)), (size[1] // 3, size[1])
    window = resize_argmax(x, size, align_corners, rows=rows, cols=cols, dense_fraction=1.0, block_elems=64)
    assert torch.equal(window, labels[:, rows[0]:rows[1], cols[0]:cols[1]])


def test_regions_ties_layouts_and_windows():
    torch.manual_seed(1)
    # piecewise-constant regions with noise, at the stride-8 layout of a real head (most cells have one candidate)
    regions = torch.randint(0, 150, (1, 4, 4))
    x = F.one_hot(F.interpolate(regions[None].float(), size=(32, 32), mode="nearest")[0].long(), 150)
    x = (x.permute(0, 3, 1, 2).float() * 4 + torch.randn(1, 150, 32, 32)).contiguous(memory_format=torch.channels_last)
    resized = F.interpolate(x, size=(256, 256), mode="bilinear", align_corners=False)
    labels = resize_argmax(x, (256, 256))
    assert_labels_of(resized, labels)
    assert torch.equal(resize_argmax(x.contiguous(), (256, 256)), labels)  # NCHW input, same labels
    # a window of the output (as after cropping padding) is that window of the labels
    assert torch.equal(resize_argmax(x, (256, 256), rows=(3, 250), cols=(17, 256)), labels[:, 3:250, 17:])
    # exact ties (integer logits): the lowest class index wins, as in argmax
    ties = torch.randint(0, 3, (2, 6, 9, 9)).float()
    for ac in (False, True):
        assert_labels_of(F.interpolate(ties, size=(40, 40), mode="bilinear", align_corners=ac),
                         resize_argmax(ties, (40, 40), ac))
    tied = torch.zeros(1, 4, 3, 3)
    assert torch.equal(resize_argmax(tied, (8, 8)), torch.zeros(1, 8, 8, dtype=torch.long))


def test_near_uniform_logits_take_the_plain_resize(monkeypatch):
    # every class is a candidate everywhere: the candidate path would do more work than a plain resize
    torch.manual_seed(2)
    x = torch.randn(1, 40, 16, 16) * 1e-3
    resized = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)
    calls = []
    monkeypatch.setattr(F, "interpolate", lambda *a, **k: calls.append(k) or resized)
    assert torch.equal(resize_argmax(x, (64, 64)), resized.argmax(1)) and len(calls) == 1
    monkeypatch.undo()
    assert_labels_of(resized, resize_argmax(x, (64, 64), dense_fraction=1.0))  # the candidate path, forced


def test_same_size_is_a_plain_argmax_and_bad_input_is_refused():
    x = torch.randn(2, 5, 6, 7)
    assert torch.equal(resize_argmax(x, (6, 7), rows=(1, 5)), x[:, :, 1:5].argmax(1))
    with pytest.raises(ValueError, match="B, K, h, w"):
        resize_argmax(x[0], (12, 14))
    with pytest.raises(ValueError, match="do not fit"):
        resize_argmax(x, (12, 14), rows=(0, 13))


def test_candidates_are_each_rows_classes_in_order_padded_with_its_first():
    from zoo.layers.resize_argmax import _candidates
    mask = torch.zeros(4, 9, dtype=torch.bool)
    for row, classes in enumerate(([2, 7], [0, 3, 8], [1, 4, 5, 6], [5])):
        mask[row, classes] = True
    cand = _candidates(mask, mask.sum(dim=1), 4)
    assert cand.tolist() == [[2, 7, 2, 2], [0, 3, 8, 0], [1, 4, 5, 6], [5, 5, 5, 5]]


def test_off_the_cpu_the_plain_resize_runs(monkeypatch):
    """The candidate passes are a CPU path (many small ops, host synchronisations); on another device the labels
    come from the plain resize and argmax (``meta`` computes shapes only, so only the path taken is checked)."""
    import zoo.layers.resize_argmax as ra

    def refuse(*a, **k):
        raise AssertionError("the candidate passes ran off the CPU")

    monkeypatch.setattr(ra, "source_index", refuse)
    labels = ra.resize_argmax(torch.empty(1, 5, 8, 8, device="meta"), (32, 30), rows=(2, 20), cols=(0, 30))
    assert labels.shape == (1, 18, 30) and labels.dtype == torch.long


def test_repeat_runs_is_repeat_interleave():
    """The block copy of each cell's value (one broadcast copy per run of equal counts) against
    ``repeat_interleave``, for the counts of an integer-factor resize, ragged ones, and more runs than it copies."""
    from zoo.layers.resize_argmax import _repeat_runs
    t = torch.arange(2 * 5 * 6).view(2, 5, 6)
    for counts in ([12, 8, 8, 8, 4], [1, 1, 3, 3, 2], [2, 1, 2, 1, 2]):
        c = torch.tensor(counts)
        assert torch.equal(_repeat_runs(t, c, 1), t.repeat_interleave(c, dim=1))
        assert torch.equal(_repeat_runs(t, c, 1, max_runs=2), t.repeat_interleave(c, dim=1))  # the fallback
    c = torch.tensor([3, 2, 2, 2, 2, 1])
    assert torch.equal(_repeat_runs(t, c, 2), t.repeat_interleave(c, dim=2))


def test_first_argmax_keeps_the_first_of_equal_values():
    from zoo.layers.resize_argmax import _first_argmax
    torch.manual_seed(0)
    v = torch.randint(0, 3, (50, 4, 5)).float()  # many ties among few values
    for c in (1, 2, 5):
        assert torch.equal(_first_argmax(v[..., :c]), v[..., :c].argmax(dim=-1))
    assert torch.equal(_first_argmax(v, loop_max=2), v.argmax(dim=-1))  # over loop_max: argmax itself
    assert _first_argmax(torch.tensor([[1.0, 3.0, 3.0, 2.0]])).tolist() == [1]
