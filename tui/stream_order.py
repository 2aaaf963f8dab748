"""The lines a one-process job printed on its stdout before stepdbg said an event on its
stderr, relayed before that line (the TUI's Log, and the terminal once the TUI closes).

The job's two streams reach the launcher by two pipes (the keeper's), read by two threads.
The agent flushes the job's stdout before it says a break (a change, a finding, a replay),
and the keeper passes on what it read of stdout before what it read of stderr, so the
job's earlier lines are in the stdout pipe by the time the break's line is in the stderr
pipe; but the stderr thread could still deliver first (a newcomer's walk: `stepdbg: break
at step 3` before `step 2 loss` on the terminal after the TUI).

``StdoutFirst`` reads stdout a chunk at a time, and delivers a chunk's lines, under the
relay's lock; an event's line on stderr waits, under that lock's condition, until the
stdout pipe holds nothing unread: what was written before it is delivered before it. The
wait has a ceiling (``HELD_AT_MOST``), so a job whose stdout never drains is never held by
it; the job itself is never held. (A torchrun job's order is rank_order's.)"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import io
import locale
import os
import select
import struct
import termios
import threading
from collections.abc import Callable
from typing import IO

HELD_AT_MOST = 2.0  # seconds an event's line waits for the stdout before it (0.5 s: a busy machine let
# `done` come after the end summary, 1 run in 3 of a walk at load 9; the wait ends when stdout drains)
CHUNK = 65536


class StdoutFirst:
    def __init__(self, lock: threading.Lock, stdout: IO[str]) -> None:
        self.ready = threading.Condition(lock)
        self.fd: int | None = stdout.fileno()  # (`stdout` itself is never read: its fd is)

    def read(self, deliver: Callable[[str], None]) -> None:
        """Relay the stdout's lines (newlines translated as a text stream's) to `deliver`,
        called under the lock, until its end."""
        fd = self.fd
        if fd is None:
            return
        decode = io.IncrementalNewlineDecoder(
            codecs.getincrementaldecoder(locale.getpreferredencoding(False))(errors="replace"), translate=True)
        waiting = select.poll()
        waiting.register(fd, select.POLLIN)
        rest = ""
        while True:
            with contextlib.suppress(InterruptedError):
                waiting.poll()  # (outside the lock: stderr's lines go on meanwhile)
            with self.ready:  # read and delivered as one, so nothing is read and not yet delivered outside it
                try:
                    data = os.read(fd, CHUNK)
                except InterruptedError:
                    continue
                except OSError:
                    data = b""
                lines = (rest + decode.decode(data, final=not data)).split("\n")
                rest = lines.pop()
                if not data and rest:
                    lines.append(rest)
                for line in lines:
                    deliver(line)
                if not data:
                    self.fd = None
                self.ready.notify_all()
            if not data:
                return

    def wait_for_stdout(self) -> None:
        """Called under the lock: until what the stdout pipe holds now is delivered
        (HELD_AT_MOST at most)."""
        self.ready.wait_for(lambda: self._unread() == 0, timeout=HELD_AT_MOST)

    def _unread(self) -> int:
        if self.fd is None:
            return 0
        try:
            return int(struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0])
        except OSError:
            return 0
