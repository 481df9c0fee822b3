"""Generator throughput per mixer, for ``tools/benchmark.py``: ``run(quick) -> list of table rows``."""
import time

import torch

import zoo
from zoo.cpu import PeakMemory
from zoo.mixers import MIXERS


@torch.no_grad()
def run(quick=True, batch=64, mixers=tuple(MIXERS)):
    """Images/s of each mixer's EMA generator (eval mode, batch 64, 32x32x3), parameter counts, and the row's own
    peak memory (``zoo.cpu.PeakMemory``: what building and running that generator added, not the process maximum).

    Args:
        quick: micro models, 3 timed batches; otherwise tiny and small models, 10 timed batches.
        batch: Latents per batch.
        mixers: Mixer codes.
    """
    device = "cuda" if torch.cuda.is_available() else "cpu"
    sizes = ["micro"] if quick else ["tiny", "small"]
    reps = 3 if quick else 10
    rows = []
    for size in sizes:
        for mixer in mixers:
            name = f"{mixer}_vit_{size}"
            with PeakMemory(device) as mem:
                gan = zoo.load(name, task="gen", img_size=32, out_chans=3).to(device).eval()
                z = torch.randn(batch, gan.z_dim, device=device)
                gan(z)  # warm-up
                if device == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(reps):
                    gan(z)
                if device == "cuda":
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
            rows.append({"task": "gen", "model": name, "input": f"z {gan.z_dim} -> 3x32x32, batch {batch}",
                         "device": device, "G params (M)": round(sum(p.numel() for p in gan.generator.parameters())
                                                                / 1e6, 2),
                         "images/s": round(reps * batch / dt, 1), "peak MB": mem.mb})
            del gan, z
    return rows


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
