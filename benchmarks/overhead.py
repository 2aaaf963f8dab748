"""1. Step-time overhead (and 5. the same on CUDA when there is a GPU)."""

from __future__ import annotations

import math
import statistics
from typing import Any

import torch

from .common import (
    DEFAULT_WATCH,
    EVERY_CONDITION,
    anomaly,
    interleaved,
    isfinite_hooks,
    plain,
    timed_steps,
    watch,
)
from .workloads import step_fn, workloads

TARGETS = {"default watch": 1.03, "activation watch": 1.10}


ROUND_SECONDS = 0.05  # each variant runs at least this long a round: a 1 ms step is timed 50 times


# The default watch when someone will look at a break (a front end, a pause, a replay): armed,
# and on a GPU the loss read before backward too (a second sync a step). The same on a CPU.
WATCHED_BY_A_PERSON = {"actions": ["replay"]}


def run(quick: bool, device: str = "cpu") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in workloads(quick):
        model, step = step_fn(name, device, small=quick)
        out[name] = _ratios(step, quick, {
            "plain": plain,
            "default watch": watch(*DEFAULT_WATCH),
            "activation watch": watch(*DEFAULT_WATCH, "activations"),
            "every condition": watch(*EVERY_CONDITION),
            "detect_anomaly": anomaly,
            "isfinite hooks": lambda m=model: isfinite_hooks(m),
            **({"front end watch": watch(*DEFAULT_WATCH, **WATCHED_BY_A_PERSON)} if device != "cpu" else {}),
        })
    if device != "cpu":
        out["syncs_per_step"] = count_syncs(device)
    return out


def run_fused(quick: bool, device: str = "cpu") -> dict[str, Any]:
    """1b. With fused AdamW (it takes found_inf): the default watch against
    --skip-on-device, which decides on the device and reads a step late; on a GPU, the
    host-device syncs a step of each."""
    out: dict[str, Any] = {}
    variants = {"plain": plain, "default watch": watch(*DEFAULT_WATCH),
                "skip on device": watch(*DEFAULT_WATCH, skip_on_device=True)}
    for name in workloads(quick):
        out[name] = _ratios(step_fn(name, device, fused=True, small=quick)[1], quick, variants)
    if device != "cpu":
        out["syncs_per_step"] = count_syncs(device, fused=True)
    return out


def _ratios(step: Any, quick: bool, variants: dict[str, Any]) -> dict[str, float]:
    """The plain step's milliseconds and each variant's step time over it (medians of
    interleaved rounds, each variant timed for at least ROUND_SECONDS a round). Quick: one
    step of each (on a small batch: the suite only checks that it runs)."""
    rounds, steps = (1, 1) if quick else (6, max(8, math.ceil(ROUND_SECONDS / _step_seconds(step))))
    med = interleaved(variants, timed_steps(step), rounds, steps)
    return {"plain_ms": med["plain"] * 1e3, **{k: v / med["plain"] for k, v in med.items() if k != "plain"}}


def _step_seconds(step: Any) -> float:
    """A plain step's median time, from a few warm ones."""
    return statistics.median(timed_steps(step)(5))


def count_syncs(device: str, fused: bool = False) -> dict[str, int]:
    """Host-device syncs per step under the default watch, as a front end would have it, and
    (with `fused`) under --skip-on-device, counted by CUDA's sync debug mode in the third
    step under each: the first steps learn the loop's shape (an armed watch reads the
    gradients after a first step's backward, not knowing yet whether another comes)."""
    import warnings

    model, step = step_fn("transformer", device, fused=fused)
    step()
    counts = {}
    variants = [("plain", plain), ("default watch", watch(*DEFAULT_WATCH)),
                ("front end watch", watch(*DEFAULT_WATCH, **WATCHED_BY_A_PERSON))]
    if fused:
        variants.append(("skip on device", watch(*DEFAULT_WATCH, skip_on_device=True)))
    for label, ctx in variants:
        with ctx(), warnings.catch_warnings(record=True) as caught:
            step()
            step()
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                step()
            finally:
                torch.cuda.set_sync_debug_mode(0)
        counts[label] = sum("synchroniz" in str(w.message) for w in caught)
    return counts
