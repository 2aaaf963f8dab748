"""What stepdbg's always-on watch and a replay cost a small transformer on this machine.

Interleaved runs in one process (plain, stepdbg, detect_anomaly, plain, stepdbg, ...),
medians of per-step times, ratios to the plain loop. Not a test: machines are noisy.

    python -m benchmarks.overhead [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from stepdbg.session import Session


def transformer() -> tuple[nn.Module, Callable[[], tuple[torch.Tensor, torch.Tensor]]]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False), nn.Linear(128, 1))

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(16, 32, 128), torch.randn(16, 32, 1)

    return model, batch


def run_steps(model: nn.Module, opt: torch.optim.Optimizer, batch: Callable, n: int) -> list[float]:
    times = []
    for _ in range(n):
        x, y = batch()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--json")
    a = p.parse_args()
    rounds, steps = (2, 3) if a.quick else (a.rounds, a.steps)
    torch.set_num_threads(1)
    model, batch = transformer()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run_steps(model, opt, batch, 3)  # warm up
    times: dict[str, list[float]] = {"plain": [], "stepdbg": [], "stepdbg+armed": [], "detect_anomaly": []}
    replay_s: list[float] = []
    for _ in range(rounds):
        times["plain"] += run_steps(model, opt, batch, steps)
        for name, armed in (("stepdbg", False), ("stepdbg+armed", True)):
            s = Session(breaks=["nan", "grad_norm>1e6", "data_wait>10"], quiet=True).start()
            s.armed = armed
            times[name] += run_steps(model, opt, batch, steps)
            if armed:
                s._ensure_step()
                t0 = time.perf_counter()
                s.replay()
                replay_s.append(time.perf_counter() - t0)
            s.stop()
        with torch.autograd.detect_anomaly(check_nan=True):
            times["detect_anomaly"] += run_steps(model, opt, batch, steps)
    plain = statistics.median(times["plain"])
    rows = {k: {"median_ms": statistics.median(v) * 1e3, "ratio": statistics.median(v) / plain}
            for k, v in times.items()}
    rows["replay (one step)"] = {"median_ms": statistics.median(replay_s) * 1e3,
                                 "ratio": statistics.median(replay_s) / plain}
    print(f"4-layer transformer encoder d=128, batch 16x32, 1 CPU thread; {rounds} rounds x {steps} steps, interleaved")
    print(f"{'variant':<20} {'median ms/step':>15} {'ratio to plain':>15}")
    for k, r in rows.items():
        print(f"{k:<20} {r['median_ms']:>15.2f} {r['ratio']:>15.3f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
