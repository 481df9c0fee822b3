import os

import pytest
import torch

# Two cores are shared by pytest and any subprocess it starts; more threads only add contention.
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
