"""Generator throughput per mixer, for ``tools/benchmark.py``: ``run(quick) -> list of table rows``."""
import time

import torch

import zoo
from zoo.mixers import MIXERS


def _peak_mb():
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2 ** 20
    try:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB (Linux), process-wide
    except ImportError:
        return float("nan")


@torch.no_grad()
def run(quick=True):
    """Images/s of each mixer's EMA generator (eval mode, batch 64, 32x32x3) and parameter counts.

    Args:
        quick: micro models, 3 timed batches; otherwise tiny and small models, 10 timed batches.
    """
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = ["micro"] if quick else ["tiny", "small"]
    reps, batch = (3, 64) if quick else (10, 64)
    rows = []
    for size in sizes:
        for mixer in MIXERS:
            name = f"{mixer}_vit_{size}"
            gan = zoo.load(name, task="gen", img_size=32, out_chans=3).to(device).eval()
            z = torch.randn(batch, gan.z_dim, device=device)
            gan(z)  # warm-up
            if device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            t0 = time.perf_counter()
            for _ in range(reps):
                gan(z)
            if device == "cuda":
                torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            rows.append({"task": "gen", "model": name, "input": f"z {gan.z_dim} -> 3x32x32, batch {batch}",
                         "device": device, "G params (M)": round(sum(p.numel() for p in gan.generator.parameters())
                                                                / 1e6, 2),
                         "images/s": round(reps * batch / dt, 1), "peak MB": round(_peak_mb(), 1)})
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
