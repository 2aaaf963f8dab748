"""The rank's own collectives, counted: which one it is in now, and the last one it finished.

A job hangs when its ranks disagree about a collective: one rank skipped an all-reduce
that the others called, so each waits in a different one. To say that while the ranks
are alive (Flight Recorder says it after the watchdog killed the job, and only for NCCL),
every rank counts the collectives it starts, per process group, with the user's line
that called them. The count is a thin wrapper of the ``torch.distributed`` functions
(what FSDP2's all-gathers and reduce-scatters call too): no per-tensor cost, and nothing
inside a ``torch.compile`` trace. DDP's reducer calls its all-reduce from C++; a rank
waiting there is seen by its stack instead (threads.blocked_in).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.measure.frames import user_frame
from stepdbg.agent.step.hooks import HookSet

NAMES = ("all_reduce", "all_reduce_coalesced", "all_gather", "all_gather_into_tensor", "all_gather_single",
         "all_gather_object", "all_gather_coalesced", "reduce_scatter", "reduce_scatter_tensor",
         "reduce_scatter_single", "all_to_all", "all_to_all_single", "broadcast", "broadcast_object_list",
         "reduce", "gather", "gather_object", "scatter", "scatter_object_list", "barrier", "monitored_barrier")


def group_name(group: Any) -> str:
    """A process group as a user knows it: its description (``new_group(group_desc=...)``,
    ``default_pg``), else its name."""
    if group is None:
        from torch.distributed import distributed_c10d

        group = distributed_c10d._get_default_group()
    desc = getattr(group, "group_desc", None)
    return desc if desc and desc != "undefined" else f"group {getattr(group, 'group_name', '?')}"


class Collectives:
    """Per process group: how many collectives this rank started; the one in progress and
    the last finished (op, group, seq, shape, where, when)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.current: dict[str, Any] | None = None
        self.last: dict[str, Any] | None = None
        self._local = threading.local()  # the depth: all_gather_object calls all_gather

    def started(self, op: str, group: Any, args: tuple[Any, ...]) -> dict[str, Any]:
        name = group_name(group)
        seq = self.counts.get(name, 0) + 1
        self.counts[name] = seq
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        frame = user_frame(inspect.currentframe())
        call = {"op": op, "group": name, "seq": seq, "started": time.monotonic(),
                "shape": list(first.shape) if first is not None else None,
                "where": {"file": frame.f_code.co_filename, "line": frame.f_lineno} if frame else None}
        self.current = call
        return call

    def finished(self, call: dict[str, Any], async_op: bool) -> None:
        self.last = {**call, "async": async_op} if async_op else call
        if self.current is call:
            self.current = None

    def wrap(self, op: str, group_at: int | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """A Patch maker for the collective `op` (its `group` argument at position `group_at`)."""
        local = self._local

        def make(orig: Callable[..., Any]) -> Callable[..., Any]:
            def collective(*args: Any, **kwargs: Any) -> Any:
                if torch.compiler.is_compiling() or getattr(local, "depth", 0):
                    return orig(*args, **kwargs)
                try:
                    group = kwargs.get("group", args[group_at] if group_at is not None and len(args) > group_at
                                       else None)
                    call = self.started(op, group, args)
                except Exception:  # counting must never fail the user's collective
                    return orig(*args, **kwargs)
                local.depth = 1
                try:
                    return orig(*args, **kwargs)
                finally:
                    local.depth = 0
                    self.finished(call, bool(kwargs.get("async_op")))

            return collective

        return make

    def state(self) -> dict[str, Any]:
        now = time.monotonic()

        def shown(call: dict[str, Any] | None) -> dict[str, Any] | None:
            if call is None:
                return None
            return {**{k: v for k, v in call.items() if k != "started"},
                    "started_s_ago": round(now - call["started"], 1)}

        return {"current": shown(self.current), "last": shown(self.last), "counts": dict(self.counts)}


def patch_collectives(counter: Collectives, h: HookSet) -> None:
    """Wrap every collective of ``torch.distributed`` (the package's name and the module's
    own, which its object collectives call) so that `counter` counts them."""
    from torch.distributed import distributed_c10d

    for op in NAMES:
        orig = getattr(distributed_c10d, op, None)
        if orig is None:
            continue
        try:
            params = list(inspect.signature(orig).parameters)
        except (TypeError, ValueError):
            params = []
        at = params.index("group") if "group" in params else None
        for owner in (torch.distributed, distributed_c10d):
            if getattr(owner, op, None) is orig:
                h.patch(owner, op, counter.wrap(op, at))
