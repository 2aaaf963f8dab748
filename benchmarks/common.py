"""Timing helpers: interleaved rounds, medians and ratios measured side by side."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch
from torch import nn

from stepdbg.agent.session import Session
from stepdbg.wire.agent_config import AgentConfig

DEFAULT_WATCH = ("nan", "grad_norm>1e9", "data_wait>60")
EVERY_CONDITION = DEFAULT_WATCH + ("loss>1e9", "loss_spike>1e6", "mem>1TB", "every=1000000", "stale_grad",
                                   "activations", "expr:loss > 1e9 and step > 0", "stall>3600")


def watch(*breaks: str, **config: Any) -> Callable[[], AbstractContextManager[Any]]:
    """A context that runs the loop under a stepdbg session with `breaks` (and AgentConfig's
    `config`, as skip_on_device=True)."""
    class _Ctx:
        def __enter__(self) -> Session:
            self.s = Session(AgentConfig(breaks=list(breaks), quiet=True, **config)).start()
            return self.s

        def __exit__(self, *exc: Any) -> None:
            self.s.stop()

    return _Ctx


def anomaly() -> AbstractContextManager[Any]:
    return torch.autograd.detect_anomaly(check_nan=True)


class isfinite_hooks:  # noqa: N801 - used like a context manager factory
    """What users paste: a forward hook on every leaf module asserting finite outputs."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def __enter__(self) -> None:
        def check(m: nn.Module, a: Any, out: Any) -> None:
            if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
                raise RuntimeError(f"non-finite output in {type(m).__name__}")

        self.handles = [m.register_forward_hook(check) for m in self.model.modules()
                        if not list(m.children())]

    def __exit__(self, *exc: Any) -> None:
        for h in self.handles:
            h.remove()


def interleaved(variants: dict[str, Callable[[], AbstractContextManager[Any]]],
                run: Callable[[int], list[float]], rounds: int, steps: int) -> dict[str, float]:
    """Median per-step seconds for each variant, running them A, B, C, A, B, C, ..."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    run(2)  # warm up
    for _ in range(rounds):
        for name, ctx in variants.items():
            with ctx():
                times[name] += run(steps)
    return {k: statistics.median(v) for k, v in times.items()}


def timed_steps(step: Callable[[], None]) -> Callable[[int], list[float]]:
    def run(n: int) -> list[float]:
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            step()
            out.append(time.perf_counter() - t0)
        return out

    return run


def plain() -> AbstractContextManager[Any]:
    return nullcontext()


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*header), fmt.format(*["-" * w for w in widths])]
                     + [fmt.format(*map(str, r)) for r in rows])
