"""Where a line run at a pause prints: its own thread's writes go to its answer, every
other thread's where they always went (evaluate.py's Evaluator.evaluate)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any


class _Router:
    """sys.stdout while code runs at a pause: the writes of the thread running it go to its
    answer, every other thread's where they always went (a process-wide redirect took the
    job's own prints from its output and log).

    One for the process, never freed, and so is every stream it ever stood for: CPython's
    print() holds a borrowed reference to sys.stdout, and an object swapped out while
    another thread prints must stay alive (a router made and freed for each eval crashed a
    job whose thread printed: SIGSEGV). Where an eval closed sys.stdout or set it to None,
    the router stays in sys.stdout standing for that: the job's writes fail (or print
    nothing) as they would plain, and stepdbg's own flush at the job's end never raises."""

    def __init__(self) -> None:
        self.target: Any = None  # where the other threads' writes go: what sys.stdout was
        self.kept: list[Any] = []  # every target it ever had, alive for good
        self._buffers: dict[int, io.StringIO] = {}  # thread id -> the answer of the eval it runs

    def stand_for(self, stream: Any) -> None:
        if not any(s is stream for s in self.kept):
            self.kept.append(stream)
        self.target = stream

    def capture(self, buf: io.StringIO | None) -> io.StringIO | None:
        """This thread's writes go to `buf` from now on (None: where the others' go); the buffer before."""
        tid = threading.get_ident()
        before = self._buffers.pop(tid, None)
        if buf is not None:
            self._buffers[tid] = buf
        return before

    def forget_threads(self) -> None:  # in a child forked during an eval: its prints are its own
        self._buffers.clear()

    def write(self, text: str) -> int:
        buf = self._buffers.get(threading.get_ident())
        if buf is not None:
            return buf.write(text)
        target = self.target
        if target is None:  # print() with sys.stdout None prints nothing
            return len(text)
        return target.write(text)

    def flush(self) -> None:
        target = self.target
        if threading.get_ident() in self._buffers or target is None:
            return
        try:
            target.flush()
        except Exception:
            if not _called_by_stepdbg():  # the job's own flush fails as it would plain
                raise

    @property
    def closed(self) -> bool:  # at exit, Python flushes sys.stdout unless it says it is closed
        return not _usable(self.target)

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty...: the real stream's
        return getattr(self.target, name)


_ROUTER = _Router()  # module-level: never freed
os.register_at_fork(after_in_child=_ROUTER.forget_threads)
_STEPDBG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _usable(stream: Any) -> bool:
    """Not None and not closed (a stream that will not say counts as open, as Python counts it at exit)."""
    if stream is None:
        return False
    try:
        return not stream.closed
    except Exception:
        return True


def _called_by_stepdbg() -> bool:
    """Whether _Router.flush's caller is stepdbg's own code (or the interpreter at exit)."""
    try:
        caller = sys._getframe(2)
    except ValueError:
        return True
    return os.path.abspath(caller.f_code.co_filename).startswith(_STEPDBG_DIR)


@contextlib.contextmanager
def stdout_of_this_thread(buf: io.StringIO) -> Iterator[None]:
    """While code runs at a pause, this thread's stdout goes to `buf`. After it, sys.stdout
    is what it was, or what the code set it to; the router stays (standing for it) only
    where that is closed or None."""
    saved = sys.stdout
    if saved is not _ROUTER:
        _ROUTER.stand_for(saved)
        sys.stdout = _ROUTER
    before = _ROUTER.capture(buf)
    try:
        yield
    finally:
        _ROUTER.capture(before)
        now = sys.stdout
        if now is _ROUTER:
            if saved is not _ROUTER and _usable(saved):
                sys.stdout = saved
        elif not _usable(now):
            _ROUTER.stand_for(now)
            sys.stdout = _ROUTER
