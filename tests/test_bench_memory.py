"""Per-row peak memory in the benchmarks (``zoo.cpu.PeakMemory``): each row reports its own peak, so a small row
measured after a big one reports less (the process maximum, used before, could only grow)."""
import pytest
import torch

from zoo.cpu import PeakMemory, peak_rss_resettable

pytestmark = pytest.mark.skipif(not peak_rss_resettable(), reason="needs Linux /proc/self/clear_refs")


def test_peak_memory_is_per_row():
    with PeakMemory() as big:
        x = torch.ones(64 * 2 ** 20)  # 256 MiB
        del x
    with PeakMemory() as small:
        x = torch.ones(4 * 2 ** 20)  # 16 MiB
        del x
    assert 240 < big.mb < 400 and 12 < small.mb < 60, (big.mb, small.mb)


@pytest.mark.slow  # ~20 s on 2 busy cores
def test_points_bench_small_row_after_big_row():
    from tasks.points import bench
    rows = bench.run(quick=True, mixers=("ea",), points=(1024, 128))
    by = {(r["task"], r["input"].split()[0]): r["peak MB"] for r in rows}
    for task in ("pcls", "pseg"):
        assert by[(task, "128")] < by[(task, "1024")], by


@pytest.mark.slow  # ~20 s on 2 busy cores
def test_gen_bench_small_row_after_big_row():
    from tasks.gen import bench
    big = bench.run(quick=True, batch=256, mixers=("sa",))[0]["peak MB"]
    small = bench.run(quick=True, batch=4, mixers=("sa",))[0]["peak MB"]
    assert small < big, (small, big)
