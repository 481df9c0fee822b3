"""The PNG helpers behind ``make demo`` and the GAN sample grids of the bundled checkpoints."""
import numpy as np
import torch

from tasks.common import pictures


class _Generator:
    """Stands in for a zoo generator: ``sample(n, seed)`` -> (n, 1, 4, 4) in [-1, 1], a different image per index."""

    def __init__(self):
        self.calls = []

    def sample(self, n, seed=0):
        self.calls.append((n, seed))
        g = torch.Generator().manual_seed(seed)
        return torch.rand(n, 1, 4, 4, generator=g) * 2 - 1


def test_tile_places_each_image_in_its_cell():
    images = [np.full((3, 5, 3), k, np.uint8) for k in range(5)]
    grid = pictures.tile(images, ncol=2, pad=1, fill=255)
    assert grid.shape == (3 * (3 + 1) + 1, 2 * (5 + 1) + 1, 3)
    assert (grid[1:4, 1:6] == 0).all() and (grid[1:4, 7:12] == 1).all()
    assert (grid[9:12, 1:6] == 4).all()
    assert (grid[9:12, 7:12] == 255).all()  # the sixth cell is empty
    assert (grid[0] == 255).all() and (grid[:, 6] == 255).all()  # borders


def test_sample_grid_draws_n_samples_with_the_seed():
    gen = _Generator()
    grid = pictures.sample_grid(gen, n=6, seed=3, ncol=3)
    assert gen.calls == [(6, 3)]
    assert grid.dtype == np.uint8 and grid.shape == (2 * 6 + 2, 3 * 6 + 2, 3)
    first = pictures.to_rgb(_Generator().sample(6, seed=3)[0])
    np.testing.assert_array_equal(grid[2:6, 2:6], first)
    assert not np.array_equal(grid[2:6, 2:6], grid[2:6, 8:12])  # another sample in the next cell


def test_save_png_round_trips(tmp_path):
    from PIL import Image
    arr = (np.arange(4 * 6 * 3) % 256).astype(np.uint8).reshape(4, 6, 3)
    path = pictures.save_png(arr, str(tmp_path / "sub" / "x.png"))
    np.testing.assert_array_equal(np.asarray(Image.open(path)), arr)
