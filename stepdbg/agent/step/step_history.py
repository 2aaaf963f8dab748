"""The steps' records, the last HISTORY_LEN of them, and what the loop has done since its
start that the advice asks about: whether it warms its learning rate up.

A warmup is an optimizer's LR rising at least twice from its first step before it ever
falls, every param group's together (one group at its peak from the start is none); per
epoch or per step alike. Each optimizer is followed on its own (a GAN's two, or three at
constant rates that differ, take turns: their records are not one another's rises). A
live `lr X` after a decay is no warmup; a cyclic or range-test schedule's first ramp is read
as one. Seen once, it is kept: the records of a 600k-step run forget their first steps.
At step 2 one rise of the one optimizer is all there is to see, and it counts while so.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Ramp:
    """One optimizer's LRs so far: its last, how often they rose, whether they ever fell."""
    last: list[Any] = field(default_factory=list)
    records: int = 0
    rises: int = 0
    fell: bool = False

    def see(self, lrs: list[Any]) -> None:
        if self.records and rose(self.last, lrs):
            self.rises += 1
        elif self.records and lrs != self.last:
            self.fell = True
        self.last, self.records = lrs, self.records + 1

    def warm(self) -> bool:
        return not self.fell and (self.rises >= 2 or (self.rises == 1 and self.records == 2))


class StepHistory(deque):  # type: ignore[type-arg]  # (deque[dict[str, Any]]: a subclass of the generic)
    def __init__(self, maxlen: int, optimizer: Callable[[], Any] = lambda: None) -> None:
        super().__init__(maxlen=maxlen)
        self._optimizer = optimizer  # the one that stepped last: whose LRs a record holds
        self._ramps: dict[int, _Ramp] = {}
        self._kept = False

    @property
    def lr_seen(self) -> bool:
        """An optimizer's learning rate was recorded (a script that updates its weights by
        hand sets none that stepdbg can read: its warmup, if any, is not seen)."""
        return self._kept or bool(self._ramps)

    @property
    def warms_up(self) -> bool:
        return self._kept or any(r.warm() for r in self._ramps.values())

    def append(self, record: dict[str, Any]) -> None:
        lrs = record.get("lr")
        if not self._kept and isinstance(lrs, list) and lrs:
            ramp = self._ramps.setdefault(id(self._optimizer()), _Ramp())
            if not ramp.fell:
                ramp.see(lrs)
                self._kept = ramp.rises >= 2 and not ramp.fell
        super().append(record)


def warmed_up(lrs: list[list[Any]]) -> bool:
    """The same reading of records that do not say their optimizer (a bundle's): as one."""
    ramp = _Ramp()
    for x in lrs:
        if x:
            ramp.see(x)
    return ramp.warm()


def rose(a: list[Any], b: list[Any]) -> bool:
    """Every group's LR is higher in `b` than in `a` (the same groups)."""
    return (len(a) == len(b) > 0 and all(isinstance(x, float) for x in a + b)
            and all(y > x for x, y in zip(a, b, strict=True)))
