"""Forwarding the job's output to front ends without taking it from its terminal.

File descriptors 1 and 2 are replaced by pipes; a thread per pipe writes everything
through to the original stdout/stderr at once (nothing is held back or lost) and hands
complete lines to a callback, which the server sends to clients as `output` events.
Opt-in (``--forward-output``): programs that check isatty() on fd 1 see a pipe.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable

MAX_LINE = 10_000


class OutputTee:
    def __init__(self, on_lines: Callable[[str, list[str]], None]) -> None:
        self.on_lines = on_lines
        self._saved: dict[int, int] = {}
        self._threads: list[threading.Thread] = []

    def start(self) -> OutputTee:
        for fd, name in ((1, "stdout"), (2, "stderr")):
            _flush()
            saved = os.dup(fd)
            r, w = os.pipe()
            os.dup2(w, fd)
            os.close(w)
            self._saved[fd] = saved
            t = threading.Thread(target=self._pump, args=(r, saved, name), name=f"stepdbg-{name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _pump(self, r: int, out: int, name: str) -> None:
        partial = b""
        while True:
            try:
                data = os.read(r, 65536)
            except OSError:
                break
            if not data:
                break
            view = memoryview(data)
            while view:
                try:
                    n = os.write(out, view)
                except OSError:
                    break
                view = view[n:]
            partial += data
            *lines, partial = partial.split(b"\n")
            if len(partial) > MAX_LINE:
                lines.append(partial)
                partial = b""
            if lines:
                with contextlib.suppress(Exception):
                    self.on_lines(name, [ln.decode(errors="replace") for ln in lines])
        if partial:
            with contextlib.suppress(Exception):
                self.on_lines(name, [partial.decode(errors="replace")])
        os.close(r)

    def stop(self) -> None:
        """Put the original descriptors back and let the pumps drain what was written."""
        _flush()
        for fd, saved in self._saved.items():
            os.dup2(saved, fd)  # closes our pipe's write end: the pump sees EOF once drained
        for t in self._threads:
            t.join(timeout=2)  # a forked child still holding the pipe keeps it open
        for saved in self._saved.values():
            with contextlib.suppress(OSError):
                os.close(saved)
        self._saved.clear()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
