"""Every live tensor, as the census's walk of the garbage collector's objects finds them,
without walking every object at every step.

The walk (walk_all, the census's) looks at every object the collector tracks: 200,000 to
400,000 in a process that imported torch, 0.1-0.3 s, and the doctor's memory rule takes a
census at the end of every step. An object the collector tracks is born in its youngest
generation and moves to an older one only by surviving a collection of its own; so the
tensors in the young generations are looked at when each collection starts (before its
survivors move), and kept by weak reference, and a census looks at the young generations
now and at the tensors kept that are still alive: the same tensors as a walk of all, for a
few hundred objects a collection. Kept by weak reference only: the job's tensors die when
they would. Where that reasoning does not hold (objects frozen by gc.freeze(), which the
walk of all skips; another collector than CPython 3.10-3.13's three generations), each
census walks all.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.measure.warning_filters import silenced

YOUNG = (0, 1)  # the generations whose survivors move to an older one
_GENERATIONAL = (3, 10) <= sys.version_info[:2] < (3, 14)


def is_tensor(obj: Any) -> bool:
    try:
        return isinstance(obj, torch.Tensor)
    except Exception:  # an object whose __class__ raises
        return False


def every_tensor(objects: list[Any]) -> list[torch.Tensor]:
    with silenced():  # isinstance on a deprecated torch object warns
        return [o for o in objects if is_tensor(o)]


def walk_all() -> list[torch.Tensor]:
    """Every tensor among every object the collector tracks."""
    return every_tensor(gc.get_objects())


class LiveTensors:
    """`walk_all()`'s tensors, kept up to date from the collections' start (see above)."""

    def __init__(self) -> None:
        self._kept: dict[int, weakref.ref[torch.Tensor]] = {}
        self._young: list[weakref.ref[torch.Tensor]] = []  # from the collections since the last call
        self._on: Callable[[str, dict[str, Any]], None] | None = None
        self._whole = not _GENERATIONAL  # every call walks all

    def __call__(self) -> list[torch.Tensor]:
        if self._whole or gc.get_freeze_count():
            self.stop()
            return walk_all()
        if self._on is None:  # the first call walks all; from now on, the collections tell
            self._on = self._collecting
            gc.callbacks.append(self._on)
            return self._keep(walk_all())
        young, self._young = self._young, []
        now = [t for g in YOUNG for t in every_tensor(gc.get_objects(g))]
        for ref in young:
            t = ref()
            if t is not None:
                self._kept[id(t)] = ref  # (an id kept before may be a dead tensor's, reused)
        alive = [t for t in (ref() for ref in self._kept.values()) if t is not None]
        return self._keep(alive + now)

    def stop(self) -> None:
        if self._on is not None:
            with contextlib.suppress(ValueError):  # (taken out by the job itself)
                gc.callbacks.remove(self._on)
            self._on = None
        self._kept.clear()
        self._young.clear()

    def _keep(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Keep `tensors` (every live one, each once) by weak reference; return them, each once."""
        self._kept = {}
        out = []
        for t in tensors:
            if id(t) not in self._kept:
                self._kept[id(t)] = weakref.ref(t)
                out.append(t)
        return out

    def _collecting(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "start" or self._whole:
            return
        try:
            for g in YOUNG[:min(int(info.get("generation", 2)), 1) + 1]:
                self._young += [weakref.ref(t) for t in every_tensor(gc.get_objects(g))]
        except Exception:  # (a tensor that takes no weak reference): from now on each call walks all
            self._whole = True
