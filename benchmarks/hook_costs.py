"""Where the watch's time goes inside a step: each hook body timed in place.

    python -m benchmarks.hook_costs [--workload mlp] [--steps 1000]

Every hook entry of the step model runs its body through ``Gate.act`` (or the Guard);
this wraps both and times the outermost call, per entry name, over blocks of steps, for
the watch with no condition, the default watch and the activation watch. A profiler
would slow every call alike; timing in place shows what a call costs between torch's
kernels, where the step's code is cold (several times its cost in a loop). Not a table of
docs/performance.md: a tool for whoever trims the hot path next.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
from collections.abc import Callable
from typing import Any

from stepdbg.agent.step import hooks

from .common import DEFAULT_WATCH, watch
from .workloads import WORKLOADS, step_fn

MODES = {"no condition": (), "default watch": DEFAULT_WATCH, "activation watch": (*DEFAULT_WATCH, "activations")}


class _Timer:
    """Nanoseconds spent in the outermost hook body, by entry name."""

    def __init__(self) -> None:
        self.spent: collections.Counter[str] = collections.Counter()
        self._depth = 0

    def wrap(self, body: Callable[..., Any]) -> Callable[..., Any]:
        def timed(owner: Any, name: str, fn: Callable[..., Any], *args: Any) -> Any:
            if self._depth:
                return body(owner, name, fn, *args)
            self._depth, t0 = 1, time.perf_counter_ns()
            try:
                return body(owner, name, fn, *args)
            finally:
                self.spent[name] += time.perf_counter_ns() - t0
                self._depth = 0

        return timed


def run(workload: str, steps: int, blocks: int = 5) -> dict[str, dict[str, float]]:
    """µs a step in each hook body, per mode (medians over `blocks` blocks of `steps`)."""
    timer = _Timer()
    originals = hooks.Gate.act, hooks.Guard.__call__
    hooks.Gate.act, hooks.Guard.__call__ = timer.wrap(originals[0]), timer.wrap(originals[1])  # type: ignore[method-assign]
    try:
        out = {}
        for mode, breaks in MODES.items():
            _, step = step_fn(workload)
            with watch(*breaks)():
                for _ in range(50):
                    step()
                per_block = []
                for _ in range(blocks):
                    timer.spent.clear()
                    for _ in range(steps):
                        step()
                    per_block.append({k: v / steps / 1e3 for k, v in timer.spent.items()})
            names = sorted({k for b in per_block for k in b})
            out[mode] = {k: statistics.median(b.get(k, 0.0) for b in per_block) for k in names}
        return out
    finally:
        hooks.Gate.act, hooks.Guard.__call__ = originals  # type: ignore[method-assign]


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.hook_costs", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=WORKLOADS, default="mlp")
    p.add_argument("--steps", type=int, default=1000, help="steps a block (five blocks a mode)")
    a = p.parse_args()
    for mode, costs in run(a.workload, a.steps).items():
        print(f"{mode}: {sum(costs.values()):.1f} µs a step in hook bodies")
        for name, us in sorted(costs.items(), key=lambda kv: -kv[1]):
            print(f"  {name:12s} {us:6.1f} µs")


if __name__ == "__main__":
    main()
