"""A locals view: the paused frame's variables, a row each (name, type, and a tensor's dtype,
shape and device, else a short repr).

Every value's repr is the user's code, and so is a tensor subclass's shape and a module's
`parameters()`. They ran on a client's thread with no limit: one sleeping repr held the view,
and that thread, for good. The view now runs them on the training thread inside the
evaluator's guards (Evaluator.interruptible: a time limit, Ctrl-C), REPR_SECONDS a value and
LOCALS_SECONDS in all: a repr that sleeps or spins is stopped and its row says so; past the
view's time, the rows left say what they are and that they were not read. The order is found
without running the user's code (`type(v)`, never `isinstance`, which reads a `__class__`
property)."""

from __future__ import annotations

import threading
import time
import types
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import FrameType
from typing import Any, Protocol

import torch

from stepdbg.agent.measure import tensors

LOCALS_SECONDS = 5.0  # what a whole view's reprs may take; the rows after say they were not read
REPR_SECONDS = 1.0  # what one value's repr may take
FEW_VALUES = 4  # a tensor of at most this many values shows them (a 0-d loss said only `float32 []`,
# never that it was nan: the closing walk of 05:50's 13)
_TYPE_NAME = type.__dict__["__name__"].__get__  # a class's name as Python keeps it (no metaclass's property)
_PLAIN = {int, float, bool, complex, str, bytes, type(None), torch.Tensor, torch.nn.Parameter}  # read by C code alone
_PLUMBING = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)


class Guard(Protocol):
    """What runs a view's user code (views.evaluate.Evaluator)."""

    def interruptible(self, limit: float | None = None) -> AbstractContextManager[Any]: ...

    def stopped(self) -> bool: ...


def frame_locals(frame: FrameType | None, limit: int = 200, everything: bool = False,
                 guard: Guard | None = None) -> list[dict[str, str]]:
    """The paused frame's locals as a locals view shows them. Your variables come first,
    tensors by size (largest first), then the rest in the frame's order; dunders, modules,
    functions and classes (a script's top level is full of them) only with `everything`,
    after yours. `guard`: what the reprs run under; where it stops them (the time limit, a
    Ctrl-C), the rows not read say so."""
    if frame is None:
        return []
    items = list(frame.f_locals.items())
    ordered = _ordered(items, everything)[:limit]
    if guard is None:  # (a Ctrl-C on the main thread is the person's: it goes on)
        return [_local_row(n, v, lambda: threading.current_thread() is threading.main_thread()) for n, v in ordered]
    rows: list[dict[str, str]] = []
    end = time.monotonic() + LOCALS_SECONDS
    try:
        for n, v in ordered:
            left = end - time.monotonic()
            if left <= 0:
                break
            if type(v) in _PLAIN:  # (no code of the user's: no guard, whose timer is a thread)
                rows.append(_local_row(n, v, guard.stopped))
                continue
            try:
                with guard.interruptible(min(REPR_SECONDS, left)):
                    row = _local_row(n, v, guard.stopped)
            except KeyboardInterrupt:  # the guard's (a Ctrl-C's or the time limit's): this row only
                row = _unread(n, v, f"(its repr ran past {min(REPR_SECONDS, left):.3g} s: stopped)")
            rows.append(row)
    except KeyboardInterrupt:  # (the guard's, landed between rows)
        pass
    return rows + [_unread(n, v, f"(not read: the view's {LOCALS_SECONDS:g} s were spent)")
                   for n, v in ordered[len(rows):]]


def _unread(name: str, v: Any, why: str) -> dict[str, str]:
    return {"name": name, "type": _TYPE_NAME(type(v)), "value": why}


def _ordered(items: list[tuple[str, Any]], everything: bool) -> list[tuple[str, Any]]:
    mine = [(n, v) for n, v in items if not _plumbing(n, v)]
    tensors_first = sorted((kv for kv in mine if _is(kv[1], torch.Tensor)), key=lambda kv: -_nbytes(kv[1]))
    ordered = tensors_first + [kv for kv in mine if not _is(kv[1], torch.Tensor)]
    if everything:
        ordered += [(n, v) for n, v in items if _plumbing(n, v)]
    return ordered


def _is(value: Any, cls: type | tuple[type, ...]) -> bool:
    return issubclass(type(value), cls)  # (isinstance reads value.__class__: a property's code)


def _plumbing(name: Any, value: Any) -> bool:
    """What a locals view hides unless asked: dunders, modules, functions and classes."""
    return (type(name) is str and name.startswith("__") and name.endswith("__")) or _is(value, _PLUMBING)


def _nbytes(t: torch.Tensor) -> int:
    try:
        return torch.Tensor.numel(t) * torch.Tensor.element_size(t)
    except Exception:  # a tensor subclass that will not say
        return 0


def _local_row(name: str, v: Any, stopped: Callable[[], bool]) -> dict[str, str]:
    if _is(v, torch.Tensor):
        value = f"{str(v.dtype).removeprefix('torch.')} {list(v.shape)} on {v.device}{_few_values(v)}"
    elif _is(v, torch.nn.Module):
        value = f"{sum(p.numel() for p in v.parameters()):,} parameters"
    else:
        value = _repr(v, stopped)
    return {"name": name, "type": _TYPE_NAME(type(v)), "value": value[:80]}


def _repr(v: Any, stopped: Callable[[], bool]) -> str:
    """A short repr, one line, long enough to read by. A KeyboardInterrupt or SystemExit
    raised by the repr itself is its failure, said in its row (it failed the whole listing);
    one that `stopped` says is the guard's (or the person's Ctrl-C) ends the view."""
    try:
        return tensors.short_repr(v, 80).replace("\n", " ")
    except (KeyboardInterrupt, SystemExit) as e:
        if isinstance(e, KeyboardInterrupt) and stopped():
            raise
        return f"<repr failed: {type(e).__name__}>"


def _few_values(t: torch.Tensor) -> str:
    """` = nan` (a 0-d tensor's value) or ` = [0.5, nan]` (a tensor of at most FEW_VALUES),
    read as the Tensor panel's slice reads them; "" for a larger one or one this rank cannot read."""
    if t.numel() > FEW_VALUES or not tensors.readable(t):
        return ""
    try:
        values = [f"{x:.6g}" if isinstance(x, float) else str(x) for x in tensors.slice_of(t, "", FEW_VALUES)]
    except Exception:  # (a tensor that will not be read: its row says what it is, as before)
        return ""
    return f" = {values[0]}" if t.dim() == 0 else f" = [{', '.join(values)}]"
