"""A locals view: the paused frame's variables, a row each (name, type, and a tensor's dtype,
shape and device, else a short repr).

Every value's repr is the user's code, and so is a tensor subclass's shape (its
`__torch_function__`) and a module's `parameters()`. Such a value is read on a thread of its
own while the paused training thread waits for it, REPR_SECONDS a value and LOCALS_SECONDS in
all: past its time a KeyboardInterrupt is raised in it, and a read that still does not end
(it sleeps in C, or catches the interrupt and waits on) is left running there, its row saying
it was interrupted (the next view says it still runs; `stopped` was said of reads that ran
on). The training thread is never held by it: under its guards (38a2e7f) a repr that caught
the interrupt and waited on held the pause, so the job, for good. A value whose read was
left running is not read again while it runs, and the interrupt is raised in it again every
RESTOP_SECONDS until it ends (a repr that spins in Python and catches one interrupt took a CPU
beside the job for good); at most LEFT_MOST reads are left running, and past that no value
with code of the user's is read (each view started a thread more). Past the view's time, the
rows left say what they are and that they were not read. The order is found without running the user's code
(`type(v)`, never `isinstance`, which reads a `__class__` property; a tensor subclass's size
with its `__torch_function__` off)."""

from __future__ import annotations

import ctypes
import threading
import time
import types
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure import tensors

LOCALS_SECONDS = 5.0  # what a whole view's reprs may take; the rows after say they were not read
REPR_SECONDS = 1.0  # what one value's repr may take
STOP_SECONDS = 0.25  # how long a stopped read is waited for before it is left running
LEFT_MOST = 64  # reads left running; past them no read is started
RESTOP_SECONDS = 0.5  # how often a read left running is interrupted again
FEW_VALUES = 4  # a tensor of at most this many values shows them (a 0-d loss said only `float32 []`,
# never that it was nan: the closing walk of 05:50's 13)
_TYPE_NAME = type.__dict__["__name__"].__get__  # a class's name as Python keeps it (no metaclass's property)
_PLAIN = (int, float, bool, complex, str, bytes, type(None), torch.Tensor, torch.nn.Parameter)  # read by C code alone
_PLUMBING = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)
_left: dict[int, _Read] = {}  # id(value): its read left running
_left_lock = threading.Lock()  # (the views of several clients, and the stopper, share _left)
_stopping = False  # a stopper thread runs (under _left_lock)


STOP = SystemExit  # raised in a read past its time (a KeyboardInterrupt the user's code could take
# for its own). Exactly SystemExit: one that lands past the read's own handlers, in threading's code
# as the thread ends, is dropped in silence by Python's default hooks, which print a subclass of it.


def frame_locals(frame: FrameType | None, limit: int = 200, everything: bool = False) -> list[dict[str, str]]:
    """The paused frame's locals as a locals view shows them. Your variables come first,
    tensors by size (largest first), then the rest in the frame's order; dunders, modules,
    functions and classes (a script's top level is full of them) only with `everything`,
    after yours. A plain value (no code of the user's) is read here; any other on a thread of
    its own, within its time (the module's docstring)."""
    if frame is None:
        return []
    ordered = _ordered(list(frame.f_locals.items()), everything)[:limit]
    rows: list[dict[str, str]] = []
    end = time.monotonic() + LOCALS_SECONDS
    for n, v in ordered:
        left = end - time.monotonic()
        if left <= 0:
            break
        rows.append(_row(n, v, _value(v)) if _plain(v) else _bounded_row(n, v, min(REPR_SECONDS, left)))
    return rows + [_unread(n, v, f"(not read: the view's {LOCALS_SECONDS:g} s were spent)")
                   for n, v in ordered[len(rows):]]


def _plain(v: Any) -> bool:
    return any(type(v) is p for p in _PLAIN)  # (`in` a set hashes the class: a metaclass's __hash__)


def _bounded_row(name: str, v: Any, limit: float) -> dict[str, str]:
    """`v`'s row read on a thread of its own within `limit` seconds, else a row that says it was interrupted (it may run on: left running)."""
    with _left_lock:
        _prune()
        if id(v) in _left:
            return _unread(name, v, "(its repr from an earlier view is still running: not run again)")
        if len(_left) >= LEFT_MOST:
            return _unread(name, v, f"(not read: {len(_left)} reprs of earlier views still run)")
    read = _Read(name, v)
    try:
        read.thread.start()
    except RuntimeError:  # (a process at its threads' limit: "can't start new thread")
        return _unread(name, v, "(not read: no thread could be started to read it)")
    read.thread.join(limit)
    if read.stop():
        read.thread.join(STOP_SECONDS)
    if read.out:
        return read.out[0]
    if read.thread.is_alive():
        _leave(read)
    return _unread(name, v, f"(its repr ran past {limit:.3g} s: interrupted)")


class _Read:
    """One value's row, read on a thread of its own, and stopped only while it reads."""

    def __init__(self, name: str, v: Any) -> None:
        self.name, self.value = name, v
        self.out: list[dict[str, str]] = []
        self.lock, self.done, self.sent = threading.Lock(), False, False
        self.thread = threading.Thread(target=self._run, name="stepdbg-locals-read", daemon=True)

    def _run(self) -> None:
        try:
            try:
                self.out.append(_row(self.name, self.value, self._read()))
            finally:
                with self.lock:
                    self.done = True  # (no stop is sent after this)
            _landed()  # (one sent before it is raised here at the latest)
        except BaseException:  # noqa: B036 - our stop: the read given up, or landed after it
            with self.lock:
                self.done = True

    def stop(self) -> bool:
        """Interrupt the read where it still runs; True where it was."""
        with self.lock:
            if self.done or not self.thread.is_alive():
                return False
            self.sent = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread.ident or 0), ctypes.py_object(STOP))
            return True

    def _read(self) -> str:
        """The value's words; what the user's code raised in reading it (any exception,
        SystemExit and KeyboardInterrupt too: it failed the whole view) in its place. A
        SystemExit after a stop was sent is the stop."""
        try:
            return _value(self.value)
        except SystemExit:
            if self.sent:
                raise
            return "<repr failed: SystemExit>"
        except BaseException as e:  # noqa: B036 - the user's code: its failure is this row's
            return f"<repr failed: {_TYPE_NAME(type(e))}>"


def _landed() -> None:
    """A Python call: the point where a pending stop is raised."""


def _prune() -> None:
    for key in [k for k, r in _left.items() if not r.thread.is_alive()]:
        del _left[key]


def _leave(read: _Read) -> None:
    """A read left running: remembered, and interrupted again until it ends."""
    global _stopping
    with _left_lock:
        _left[id(read.value)] = read  # (the value held: its id names it alone while its read runs)
        if not _stopping:
            try:
                threading.Thread(target=_keep_stopping, name="stepdbg-locals-stop", daemon=True).start()
                _stopping = True
            except RuntimeError:  # (no thread to be had: the next read left tries again)
                pass


def _keep_stopping() -> None:
    """Interrupt the reads left running again, every RESTOP_SECONDS, until none is left."""
    global _stopping
    while True:
        time.sleep(RESTOP_SECONDS)
        with _left_lock:
            _prune()
            if not _left:
                _stopping = False
                return
            running = list(_left.values())
        for read in running:
            read.stop()


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
        with torch._C.DisableTorchFunctionSubclass():  # (a subclass's __torch_function__ is the user's code)
            return torch.Tensor.numel(t) * torch.Tensor.element_size(t)
    except Exception:  # a tensor subclass that will not say
        return 0


def _row(name: str, v: Any, value: str) -> dict[str, str]:
    return {"name": name, "type": _TYPE_NAME(type(v)), "value": value[:80]}


def _value(v: Any) -> str:
    if _is(v, torch.Tensor):
        return f"{str(v.dtype).removeprefix('torch.')} {list(v.shape)} on {v.device}{_few_values(v)}"
    if _is(v, torch.nn.Module):
        return f"{sum(p.numel() for p in v.parameters()):,} parameters"
    return tensors.short_repr(v, 80).replace("\n", " ")


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
