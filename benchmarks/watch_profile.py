"""Where the default watch's time goes in one step: the host's Python (cProfile, stepdbg's
own functions) and the device work it adds (torch.profiler: kernels launched and CUDA
runtime calls a step, plain against watched). Not part of `python -m benchmarks`: run it
when a ratio in table 1 needs explaining.

    python -m benchmarks.watch_profile [--device cuda] [--workload mlp] [--steps 200]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections import Counter

import torch

from .common import DEFAULT_WATCH, plain, watch
from .workloads import step_fn


def _timed(step, ctx, n: int, device: str) -> float:
    with ctx():
        for _ in range(10):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - t) / n * 1e3


def _device_calls(step, ctx, n: int) -> Counter:
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with ctx():
        for _ in range(5):
            step()
        with profile(activities=acts) as prof:
            for _ in range(n):
                step()
    counts: Counter = Counter()
    for e in prof.key_averages():
        counts[e.key] += e.count
    return Counter({k: v / n for k, v in counts.items()})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--workload", default="mlp")
    p.add_argument("--steps", type=int, default=200)
    a = p.parse_args()
    _, step = step_fn(a.workload, a.device)
    variants = {"plain": plain, "default watch": watch(*DEFAULT_WATCH)}
    for name, ctx in variants.items():
        print(f"{name}: {_timed(step, ctx, a.steps, a.device):.3f} ms a step ({a.workload}, {a.device})")
    calls = {name: _device_calls(step, ctx, 20) for name, ctx in variants.items()}
    added = {k: calls["default watch"][k] - calls["plain"].get(k, 0) for k in calls["default watch"]}
    print("\nops and runtime calls the watch adds a step (torch.profiler; count a step):")
    for k, v in sorted(added.items(), key=lambda kv: -kv[1])[:30]:
        if v > 0.01:
            print(f"  {v:7.2f}  {k}")
    with watch(*DEFAULT_WATCH)():
        for _ in range(10):
            step()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(a.steps):
            step()
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats("stepdbg", 30)
    print(f"\nstepdbg's own functions over {a.steps} steps, by time in each (cProfile):")
    print("\n".join(out.getvalue().splitlines()[6:45]))


if __name__ == "__main__":
    main()
