import os
import socket
import sys

import pytest
import torch

# tests/ is a package (see __init__.py), so pytest imports these modules as tests.<name>; they also import each
# other by plain name (`from hub_server import hub_env`, `from test_train_cls import ...`), so the folder itself
# goes on sys.path as well.
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# Two cores are shared by pytest and any subprocess it starts; more threads only add contention.
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def one_thread():
    """Run the test on one thread (restored after): records of scores were measured that way, and GEMM reductions
    then match them bit for bit on the same CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
