"""What arming costs a step: the toy step of client_load.py (Linear 64-64-1, batch 32, one
torch thread, about 0.4 ms) under one in-process session, with replay armed (what attaching
a front end turns on: the output's gradient hook, the buffers' copies, the backward watch)
and not, side by side.

    python -m benchmarks.armed_cost [--rounds 300] [--steps 10]

Rounds of `steps` steps alternate unarmed and armed (the order flips each round); each step
is timed by the thread's CPU time; p10 and p25 of the steps, each way, and armed / unarmed.
A busy machine spreads the steps (other processes, the cache), so the low quantiles are the
figures to compare (whole rounds' means moved 3-5% from run to run here, these 1-2 us). The Python calls each step makes, each way, are counted once
(sys.setprofile: deterministic, the figure that tells a change of the hot path apart from
noise). Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .common import watch


def _toy() -> Callable[[], None]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64), torch.randn(32, 1)

    def step() -> None:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


def _calls(step: Callable[[], None], steps: int) -> tuple[float, float]:
    """(Python calls, C calls) a step makes, counted over `steps` steps."""
    py = c = 0

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal py, c
        if event == "call":
            py += 1
        elif event == "c_call":
            c += 1

    sys.setprofile(count)
    try:
        for _ in range(steps):
            step()
    finally:
        sys.setprofile(None)
    return py / steps, c / steps


QUANTILES = (10, 25)


def _quantiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {f"p{q}_us": round(xs[len(xs) * q // 100], 1) for q in QUANTILES}


def run(rounds: int = 300, steps: int = 10) -> dict[str, Any]:
    """{"unarmed": {p10_us, p25_us, py_calls, c_calls}, "armed": {...}, "ratio_p10", "ratio_p25"}."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    step = _toy()
    times: dict[str, list[float]] = {"unarmed": [], "armed": []}
    out: dict[str, Any] = {}
    try:
        with watch("nan")() as s:
            for _ in range(50):
                step()
            for r in range(rounds):
                for way in ("unarmed", "armed") if r % 2 else ("armed", "unarmed"):
                    s.model.armed = way == "armed"
                    step()  # (the first armed step registers; the first unarmed one removes nothing)
                    for _ in range(steps):
                        t = time.thread_time_ns()
                        step()
                        times[way].append((time.thread_time_ns() - t) / 1e3)
            for way in times:
                s.model.armed = way == "armed"
                step()
                py, c = _calls(step, 20)
                out[way] = {**_quantiles(times[way]), "py_calls": round(py, 2), "c_calls": round(c, 2)}
    finally:
        torch.set_num_threads(threads)
    for q in QUANTILES:
        out[f"ratio_p{q}"] = round(out["armed"][f"p{q}_us"] / out["unarmed"][f"p{q}_us"], 3)
    return out


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.armed_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=300, help="rounds each way")
    p.add_argument("--steps", type=int, default=10, help="steps a round")
    a = p.parse_args()
    r = run(a.rounds, a.steps)
    for way in ("unarmed", "armed"):
        w = r[way]
        print(f"{way:8s} p10 {w['p10_us']:7.1f} µs  p25 {w['p25_us']:7.1f} µs  "
              f"{w['py_calls']:6.1f} Python calls, {w['c_calls']:6.1f} C calls a step")
    print(f"armed / unarmed: p10 {r['ratio_p10']:.3f}x, p25 {r['ratio_p25']:.3f}x "
          f"(+{r['armed']['p10_us'] - r['unarmed']['p10_us']:.1f} µs at p10); "
          f"arming adds {r['armed']['py_calls'] - r['unarmed']['py_calls']:.1f} Python calls a step")


if __name__ == "__main__":
    main()
