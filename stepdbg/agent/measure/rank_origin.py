"""Which rank a non-finite value was born on, in a job of many ranks: DDP's all-reduce
carries one rank's NaN gradients to every rank, so the other ranks' replays find their
own step finite. The rank whose own step made it says so in the job's store at its
break (its loss was non-finite, or its replay named where it is born); the others read it
there, at their own break's words and in their replays (a store round trip, never a collective: the ranks may not be in
the same one) and say "from rank 1", in the live verdict and in their bundles.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch

KEY = "stepdbg/born/{step}/{rank}"


def _job() -> tuple[Any, int, int] | None:
    """(store, rank, world) of a job of several ranks, else None."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return None
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_default_store(), dist.get_rank(), dist.get_world_size()


def world() -> int | None:
    job = _job()
    return job[2] if job else None


def publish(step: Any) -> None:
    """This rank's own step made the non-finite value of step `step`."""
    try:
        job = _job()
        if job is not None and isinstance(step, int):
            store, rank, _ = job
            store.set(KEY.format(step=step, rank=rank), "1")
    except Exception:  # (the store went with a rank that ended: nothing is said, nothing fails)
        pass


def born_on(step: Any, wait: float = 0.0) -> int | None:
    """Another rank that said its own step `step` made the non-finite value, else None;
    asked again for up to `wait` seconds (on an accelerator that rank reads its loss at the
    same pause point as this one's gradients: it may say so a moment later)."""
    try:
        job = _job()
        if job is None or not isinstance(step, int):
            return None
        store, rank, size = job
        until = time.monotonic() + wait
        while True:
            found = next((r for r in range(size) if r != rank and store.check([KEY.format(step=step, rank=r)])), None)
            if found is not None or time.monotonic() >= until:
                return found
            time.sleep(0.02)
    except Exception:
        return None


def own_loss_nonfinite(brk: dict[str, Any]) -> bool:
    """The break's loss (this rank's own, before any all-reduce) is not finite."""
    loss = (brk.get("scalars") or {}).get("loss")
    return (isinstance(loss, str) and loss in ("nan", "inf", "-inf")) or \
        (isinstance(loss, float) and not math.isfinite(loss))


def from_rank_words(rank: int | None) -> str:
    """The verdict of a rank whose own step, replayed, stays finite in a job of many ranks."""
    source = f"rank {rank}, whose own step made them (its replay names where they are born)" if rank is not None \
        else "another rank, whose replay names where they are born (if no rank's replay makes them again, a " \
             "transient fault)"
    return ("not on this rank: its own forward and backward, replayed, stay finite; the non-finite gradients came "
            f"in through the all-reduce from {source}")
