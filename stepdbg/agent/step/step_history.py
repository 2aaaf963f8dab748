"""The steps' records, the last HISTORY_LEN of them, and what the loop has done since its
start that the advice asks about: whether it warms its learning rate up.

A warmup is every param group's LR rising over two steps running; in a loop of two
optimizers taking turns (a GAN's discriminator and generator, one record each), over two
of its own steps, each record two apart. A live `lr X` is one jump, and a decay never
rises. Seen once, it is kept: the records of a 600k-step run forget their first steps.
"""

from __future__ import annotations

from collections import deque
from typing import Any

LAGS = (1, 2)  # records apart: one optimizer, two taking turns


class StepHistory(deque):  # type: ignore[type-arg]  # (deque[dict[str, Any]]: a subclass of the generic)
    def __init__(self, maxlen: int) -> None:
        super().__init__(maxlen=maxlen)
        self.warms_up = False
        self._lrs: deque[list[Any]] = deque(maxlen=2 * max(LAGS) + 1)

    def append(self, record: dict[str, Any]) -> None:
        if not self.warms_up:
            lrs = record.get("lr")
            self._lrs.append(lrs if isinstance(lrs, list) else [])
            self.warms_up = warmed_up(list(self._lrs), last_only=True)  # (the earlier ones were looked at)
        super().append(record)


def warmed_up(lrs: list[list[Any]], last_only: bool = False) -> bool:
    """Some lag of LAGS over which every group's LR rose twice running, in `lrs` (one list
    of group LRs a record, oldest first); `last_only`: ending at the last record."""
    n = len(lrs)
    return any(rose(lrs[i - 2 * lag], lrs[i - lag]) and rose(lrs[i - lag], lrs[i])
               for lag in LAGS for i in range(n - 1 if last_only else 2 * lag, n) if i >= 2 * lag)


def rose(a: list[Any], b: list[Any]) -> bool:
    """Every group's LR is higher in `b` than in `a` (the same groups)."""
    return (len(a) == len(b) > 0 and all(isinstance(x, float) for x in a + b)
            and all(y > x for x, y in zip(a, b, strict=True)))
