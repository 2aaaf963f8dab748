"""Gradient accumulation, replay armed: what the check after each micro-batch's backward
costs (backward_capture.py: one fused norm of the gradients, read; N - 1 reads a step of N).

    python -m benchmarks.accum_check [--quick] [--micro 4] [--device cpu|cuda]

Side by side, interleaved rounds in one process (common.interleaved): the plain loop, the
default watch armed for a replay (--on-break replay) with the check turned off, and the same
with it. The figure is the ratio armed/armed-without-check. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812

from .common import DEFAULT_WATCH, interleaved, plain, table, timed_steps, watch
from .overhead import ROUND_SECONDS, _step_seconds
from .workloads import WORKLOADS, CharGPT, deep, mlp, transformer


def accum_step(name: str, micro: int, device: str) -> Callable[[], None]:
    """One optimizer step of `micro` forward/backward passes (loss / micro), clipped, on the
    workload `name`."""
    torch.manual_seed(0)
    model = {"mlp": mlp, "transformer": transformer, "gpt": CharGPT, "deep": deep}[name]().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def batch() -> tuple[torch.Tensor, torch.Tensor, Callable[..., torch.Tensor]]:
        if name == "mlp":
            return torch.randn(32, 64, device=device), torch.randint(0, 10, (32,), device=device), F.cross_entropy
        if name == "deep":
            return torch.randn(8, 32, device=device), torch.randn(8, 1, device=device), F.mse_loss
        if name == "transformer":
            return torch.randn(4, 32, 128, device=device), torch.randn(4, 32, 1, device=device), F.mse_loss
        idx = torch.randint(0, 65, (4, 65), device=device)
        return idx[:, :-1], idx[:, 1:], lambda out, y: F.cross_entropy(out.flatten(0, 1), y.flatten())

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        for _ in range(micro):
            x, y, loss_fn = batch()
            (loss_fn(model(x), y) / micro).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device != "cpu":
            torch.cuda.synchronize()

    return step


def armed(check: bool) -> Callable[[], Any]:
    """The default watch armed for a replay; without `check`, the per-backward read is off."""
    base = watch(*DEFAULT_WATCH, actions=["replay"])

    class _Ctx(base):  # type: ignore[misc, valid-type]
        def __enter__(self) -> Any:
            s = super().__enter__()
            if not check:
                s.model.backward_watch.after_backward = lambda model: None
            return s

    return _Ctx


def run(quick: bool, micro: int, device: str) -> dict[str, dict[str, float]]:
    out = {}
    variants = {"plain": plain, "armed, no check": armed(False), "armed": armed(True)}
    for name in WORKLOADS:
        step = accum_step(name, micro, device)
        rounds, steps = (1, 2) if quick else (6, max(8, math.ceil(ROUND_SECONDS / _step_seconds(step))))
        med = interleaved(variants, timed_steps(step), rounds, steps)
        out[name] = {"plain_ms": med["plain"] * 1e3, "no_check_ms": med["armed, no check"] * 1e3,
                     "armed_ms": med["armed"] * 1e3, "ratio": med["armed"] / med["armed, no check"]}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = p.parse_args()
    r = run(a.quick, a.micro, a.device)
    rows = [[w, f"{v['plain_ms']:.2f}", f"{v['no_check_ms']:.2f}", f"{v['armed_ms']:.2f}", f"{v['ratio']:.3f}x"]
            for w, v in r.items()]
    print(f"{a.micro} micro-batches a step ({a.device}; medians of interleaved steps)")
    print(table(rows, ["workload", "plain ms", "armed, no check ms", "armed ms", "armed / no check"]))


if __name__ == "__main__":
    main()
