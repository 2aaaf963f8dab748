"""The cost of a rewind's snapshots: one snapshot's time against one step's, and its size.

For each workload, after a few steps (so the optimizer has its state), steps and
snapshots are timed interleaved (step, snapshot, step, snapshot, ...) and the medians
compared. A snapshot reuses the buffers of the one it replaces (``--keep`` of them), as
in a long run. On CUDA the copy is asynchronous (pinned host memory, a side stream): the
figure that matters there is the step time with a snapshot every 100 steps against none,
measured interleaved in blocks of 100 steps.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from stepdbg.agent.session import Session
from stepdbg.wire.agent_config import AgentConfig

from .workloads import step_fn, workloads

TARGET_CPU = 1.0  # a snapshot takes at most one step's time
TARGET_CUDA = 0.02  # at --keep-every 100, under 2% of step time


def _sync(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def run(quick: bool, device: str = "cpu") -> dict[str, Any]:
    rounds = 3 if quick else 30  # quick (a small batch too): the suite only checks that it runs
    out: dict[str, Any] = {}
    for name in workloads(quick):
        s = Session(AgentConfig(breaks=["nan"], quiet=True)).start()
        try:
            _, step = step_fn(name, device, small=quick)
            s.rewinder.configure(every=0, keep=2)
            for _ in range(1 if quick else 3):  # (the optimizer has its state after one)
                step()
            steps, snaps = [], []
            for k in range(rounds):
                t0 = time.perf_counter()
                step()
                steps.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                snap = s.rewinder.take(k + 1)
                if snap.done is not None:
                    snap.done.synchronize()  # the whole copy, not only its launch
                snaps.append(time.perf_counter() - t0)
            row = {"step_ms": statistics.median(steps) * 1e3, "snapshot_ms": statistics.median(snaps[2:]) * 1e3,
                   "bytes": snap.nbytes}
            row["snapshot_per_step"] = row["snapshot_ms"] / row["step_ms"]
            if device != "cpu":
                row["keep_every_100_ratio"] = _every_100(s, step, device, 2 if quick else 5)
            out[name] = row
        finally:
            s.stop()
    return out


def _every_100(s: Session, step: Any, device: str, rounds: int) -> float:
    """Median step time with a snapshot every 100 steps over none, blocks interleaved."""
    times: dict[int, list[float]] = {0: [], 100: []}
    for _ in range(rounds):
        for every in (0, 100):
            s.rewinder.configure(every=every)
            _sync(device)
            t0 = time.perf_counter()
            for _ in range(100):
                step()
            _sync(device)
            times[every].append(time.perf_counter() - t0)
    s.rewinder.configure(every=0)
    return statistics.median(times[100]) / statistics.median(times[0])
