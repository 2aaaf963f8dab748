"""What the threads of the job are doing: every thread's stack, where a thread that makes
no progress waits (a collective, a DataLoader), and a DataLoader's workers as the kernel
sees them (/proc). Read by the stall watchdog, the status and the Threads panel."""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import threading
from types import FrameType
from typing import Any

from stepdbg.agent.measure import source_lines
from stepdbg.agent.measure.frames import is_own_file, is_user_file, without_own

THREADS_MOST = 128  # threads whose stacks are told: the training thread, the main thread, then the user's
FRAMES_MOST = 48  # a stack's innermost frames told (the front ends show the last 8 to 10)
WALK_MOST = 1000  # a stack's innermost frames looked at (past them, counted)
NAME_MOST = 200  # characters of a thread's name told, and of a line of its code


def thread_stacks(training: int | None = None) -> list[dict[str, Any]]:
    """Every thread's stack: the training thread first, then the main thread, the user's
    other threads, and stepdbg's own last, named with no stack (`own`: its frames are
    stepdbg's and the standard library's it calls, nothing a person wrote).

    Bounded whatever the process holds (2,000 threads 300 calls deep were 85 MB, over the
    wire's frame): the stacks of the first THREADS_MOST threads, each its innermost
    FRAMES_MOST frames; a thread says what was left out (`frames_not_shown`,
    `stack_not_read`)."""
    names = {t.ident: t for t in threading.enumerate()}
    out, walked = [], {}
    for tid, frame in sys._current_frames().items():
        t = names.get(tid)
        inner, outer, depth = _walk(frame)
        walked[tid] = (inner, depth)
        name, daemon = _held(t, "_name"), _held(t, "_daemonic")
        out.append({
            "id": tid,
            "name": _cut(str.__str__(name) if issubclass(type(name), str) else f"thread-{tid}"),
            "daemon": daemon if type(daemon) is bool else None,
            "main": t is threading.main_thread(),
            "own": _started_by_stepdbg(outer),
            "stack": [],
        })
    out.sort(key=lambda t: (t["id"] != training, not t["main"], t["own"], t["name"]))
    for i, t in enumerate(th for th in out if not th["own"]):
        if i >= THREADS_MOST:
            t["stack_not_read"] = True
            continue
        inner, depth = walked[t["id"]]
        # The person's frames only, as a Ctrl-C's traceback
        mine = without_own(inner, lambda f: f.f_code.co_filename)
        t["stack"] = [_frame(f) for f in mine[-FRAMES_MOST:]]
        if not_shown := len(mine) - len(t["stack"]) + depth - len(inner):
            t["frames_not_shown"] = not_shown
    return out


def _walk(frame: FrameType) -> tuple[list[FrameType], list[str], int]:
    """A stack's innermost WALK_MOST frames (outermost first), its outermost frames' files
    (outermost first) and its depth."""
    inner: list[FrameType] = []
    outer: collections.deque[str] = collections.deque(maxlen=8)
    depth = 0
    f: FrameType | None = frame
    while f is not None:
        if depth < WALK_MOST:
            inner.append(f)
        outer.appendleft(f.f_code.co_filename)
        depth += 1
        f = f.f_back
    return inner[::-1], list(outer), depth


_THREADS_DICT = threading.Thread.__dict__["__dict__"]  # a thread's own attributes, by Python's own descriptor


def _held(t: threading.Thread | None, key: str) -> Any:
    """What Thread keeps in `t` under `key` (its `_name`, `_daemonic`), read by C code alone: a
    Thread subclass's `name` or `daemon` property (or its `__getattribute__`) is the user's code,
    which the stall watchdog ran on its own thread (one that slept held every stall report)."""
    if t is None:
        return None
    try:
        held = _THREADS_DICT.__get__(t, type(t))
    except Exception:  # (a thread without one: a C extension's)
        return None
    return dict.get(held, key) if issubclass(type(held), dict) else None


def _frame(f: FrameType) -> dict[str, Any]:
    line = source_lines.line(f.f_code.co_filename, f.f_lineno, f.f_globals)
    return {"file": f.f_code.co_filename, "line": f.f_lineno, "function": f.f_code.co_name, "code": _code(line)}


def _code(line: str) -> str:
    """A line of code stripped and cut, in time that does not grow with it: a line of 50 MB was
    stripped whole at each frame told (8 threads 48 frames deep in one: 41 s a stacks view)."""
    if len(line) <= 4 * NAME_MOST:
        return _cut(line.strip())
    head, tail = line[:4 * NAME_MOST], line[-4 * NAME_MOST:]
    lead, trail = len(head) - len(head.lstrip()), len(tail) - len(tail.rstrip())
    return _cut(line[lead:lead + NAME_MOST], len(line) - lead - trail)


def _cut(text: str, length: int | None = None) -> str:
    """`text` (of `length` characters in all, where it is their start) cut to NAME_MOST."""
    n = len(text) if length is None else length
    return text if n <= NAME_MOST else f"{text[:NAME_MOST]}… [{n - NAME_MOST} more characters]"


def _started_by_stepdbg(outer: list[str]) -> bool:
    """A thread whose code, past threading's start-up, is stepdbg's own (its server, its
    watchdog, its output pumps). `outer`: its outermost frames' files."""
    started = [file.endswith(f"{os.sep}threading.py") for file in outer]
    if not started or not started[0]:  # the main thread (which runs the launcher, then the script)
        return False
    first = next((file for file, threading_py in zip(outer, started, strict=True) if not threading_py), None)
    return first is not None and is_own_file(first)


def blocked_in(frame: FrameType, multi_rank: bool) -> dict[str, Any]:
    """Where a thread that makes no progress waits: the user's line it is on, the
    innermost Python function, and the collective when it is one. Read from its innermost
    WALK_MOST frames, one line of code looked up (the status asks at every poll while the
    training thread waits: a stack 20,000 deep had every line looked up, 40 to 150 ms a time)."""
    inner = _walk(frame)[0]
    top = inner[-1]
    user = next((f for f in reversed(inner) if is_user_file(f.f_code.co_filename)), top)
    collective = None
    for f in inner:
        path = f.f_code.co_filename.replace(os.sep, "/")
        if path.endswith("torch/distributed/distributed_c10d.py"):
            collective = f.f_code.co_name  # all_reduce, barrier, broadcast...; the outermost one
            break
        if path.endswith("torch/nn/parallel/distributed.py"):
            collective = f"DistributedDataParallel.{f.f_code.co_name}"
            break
    if collective is None and multi_rank and any(f.f_code.co_name == "_engine_run_backward" for f in inner):
        collective = "backward (DDP's all-reduce)"
    return {**_frame(user), "inner": f"{top.f_code.co_name} ({os.path.basename(top.f_code.co_filename)}:{top.f_lineno})",
            "collective": collective}


def loader_settings(it: Any) -> dict[str, Any]:
    """A DataLoader iterator's settings and its workers' process states."""
    info: dict[str, Any] = {
        "num_workers": getattr(it, "_num_workers", None),
        "pin_memory": getattr(it, "_pin_memory", None),
        "prefetch_factor": getattr(it, "_prefetch_factor", None),
        "persistent_workers": getattr(it, "_persistent_workers", None),
        "timeout": getattr(it, "_timeout", None),
        "cpu_count": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "workers": [],
    }
    for w in getattr(it, "_workers", []) or []:
        pid = getattr(w, "pid", None)
        info["workers"].append({"pid": pid, "alive": w.is_alive(), **_proc_state(pid)})
    return info


def _proc_state(pid: int | None) -> dict[str, Any]:
    if pid is None:
        return {}
    out: dict[str, Any] = {}
    with contextlib.suppress(OSError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            out["state"] = f.read().rsplit(")", 1)[1].split()[0]
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/wchan") as f:
            out["wchan"] = f.read().strip() or None
    return out
