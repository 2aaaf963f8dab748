"""The order of a torchrun job's lines as its ranks wrote them, for a launcher that relays
them (the TUI's Log, and the terminal once the TUI closes).

With ``--tee 3`` torchrun writes each rank's stdout and stderr to two files and copies each
to its own stdout/stderr (``[default0]:`` before each line) by a thread of its own that
reads its file every 0.1 s: the order between a rank's two streams is lost. A rank says a
break (a change, a finding, a replay) on its stderr once its stdout is flushed, so the
lines it printed before are in its stdout file then; relayed, they came after the break's
line (a newcomer's walk: `step 10 loss nan` after `break at step 12`).

``RankOrder`` holds a rank's stderr from such a line on until every rank's relayed stdout
has reached the size its stdout file had when the line came (torchrun's files are under
the ``--log-dir`` the launcher gave it), and never longer than ``HELD_AT_MOST`` (a line
torchrun dropped, a size counted otherwise). Every rank's, not its own alone: torchrun reads
each file by a thread of its own, so rank 1's break came before rank 0's `step 0 loss` and
`step 5 loss`, printed before it (the seventeenth walk's 4; the ranks go in step, by their
collectives). Stdout is never held, nor is the job. Every
line stepdbg says on a rank's stderr (``OWN``) is held so, not an event's alone: its end
summary (`conditions that stayed true ...`) came before the rank's `step 15 loss` and
`rank 0 done` (issue 45, the twelfth walk's 2). ``caught_up`` says when all a rank has
written is relayed: the Log says `[rank 0] is gone` after it (job_source)."""

from __future__ import annotations

import glob
import os
import re
import threading
from collections.abc import Callable
from typing import Any

HELD_AT_MOST = 2.0  # seconds a rank's stderr waits for its stdout
PREFIX = re.compile(r"^\[[A-Za-z_]*?(\d+)\]:(.*)$")  # torchrun's `[default0]:` (as TorchrunLog reads it)
# The job's stderr line of an event the Log says in its own words (a change, a break, a finding,
# a replay): `stepdbg: ...`, a rank's `stepdbg[rank 0]: ...`, under torchrun after `[default0]:`.
SAID = re.compile(r"stepdbg(?:\[rank (\d+)\])?: (change: |break at step |finding \[|replay of step )")
OWN = re.compile(r"stepdbg\[rank \d+\]: ")  # any line a rank's agent says (its stdout flushed before it)


def source_of(stream: str, line: str) -> tuple[str, str]:
    """(which writer, the line's own text): a torchrun rank's line is its stream and prefix
    (`stderr[default0]:`, the ranks' lines interleave), its text after the prefix."""
    m = PREFIX.match(line)
    return (f"{stream}{line[:len(line) - len(m.group(2))]}", m.group(2)) if m else (stream, line)


def said_as_event(line: str) -> bool:
    """The job's own line of an event the Log says in its words, torchrun's prefix or not."""
    return said_by(line)[0]


def said_by(line: str) -> tuple[bool, int | None]:
    """(the job's own line of an event, the rank that said it: None for a job of one process)."""
    m = SAID.match(source_of("", line)[1])
    return m is not None, int(m.group(1)) if m is not None and m.group(1) is not None else None


class RankOrder:
    """`emit(stream, line)` each line in the order the rank wrote it. `feed` and the release
    after HELD_AT_MOST both run under `lock` (the relay's)."""

    def __init__(self, log_dir: str, emit: Callable[[str, str], None], lock: threading.Lock,
                 torchrun: Any = None) -> None:
        """`torchrun`: the launcher's TorchrunLog, whose `caught_up` this is (JobSource asks it)."""
        self.log_dir, self.lock = log_dir, lock
        self.relayed: dict[int, int] = {}  # bytes of each rank's stdout relayed so far
        self.relayed_err: dict[int, int] = {}  # and of its stderr
        self.held: dict[int, list[str]] = {}  # each rank's stderr lines waiting for the ranks' stdout
        self.until: dict[int, dict[int, int]] = {}  # the stdout size of each rank they wait for
        self._emit = emit
        if torchrun is not None:
            torchrun.caught_up = self.caught_up

    def emit(self, stream: str, line: str) -> None:
        m = PREFIX.match(line)
        if m is not None and stream == "stderr":
            rank = int(m.group(1))
            self.relayed_err[rank] = self.relayed_err.get(rank, 0) + len(m.group(2).encode("utf-8", "replace")) + 1
        self._emit(stream, line)

    def stdout_size(self, rank: int, name: str = "stdout") -> int:
        """The size of the rank's stdout (or stderr) file now (its last attempt's), or 0."""
        files = glob.glob(os.path.join(glob.escape(self.log_dir), "*", "attempt_*", str(rank), f"{name}.log"))
        try:
            return os.path.getsize(max(files, key=os.path.getmtime)) if files else 0
        except OSError:
            return 0

    def behind(self) -> dict[int, int]:
        """The ranks whose stdout file holds more than is relayed: the size of each now."""
        dirs = glob.glob(os.path.join(glob.escape(self.log_dir), "*", "attempt_*", "*"))
        ranks = {int(name) for name in map(os.path.basename, dirs) if name.isdigit()}
        return {r: size for r in ranks if (size := self.stdout_size(r)) > self.relayed.get(r, 0)}

    def caught_up(self, rank: int) -> bool:
        """(Not under the lock.) Everything rank `rank` (its local rank: torchrun's prefix)
        wrote to its files so far is relayed: none held, none unread."""
        with self.lock:
            return rank not in self.held and self.relayed.get(rank, 0) >= self.stdout_size(rank) \
                and self.relayed_err.get(rank, 0) >= self.stdout_size(rank, "stderr")

    def feed(self, stream: str, line: str) -> None:
        m = PREFIX.match(line)
        if m is None:
            self.emit(stream, line)  # torchrun's own line
            return
        rank, text = int(m.group(1)), m.group(2)
        if stream == "stdout":
            self.relayed[rank] = self.relayed.get(rank, 0) + len(text.encode("utf-8", "replace")) + 1
            self.emit(stream, line)
            for waiting in [r for r, until in self.until.items()
                            if all(self.relayed.get(o, 0) >= size for o, size in until.items())]:
                self.release(waiting)
            return
        if rank in self.held:
            self.held[rank].append(line)
            return
        if OWN.match(text):
            behind = self.behind()
            if behind:
                self.held[rank], self.until[rank] = [line], behind
                timer = threading.Timer(HELD_AT_MOST, self._late, args=(rank, self.held[rank]))
                timer.daemon = True
                timer.start()
                return
        self.emit(stream, line)

    def release(self, rank: int) -> None:
        for line in self.held.pop(rank, []):
            self.emit("stderr", line)
        self.until.pop(rank, None)

    def release_all(self) -> None:
        """(Under the lock.) Every held line, as the streams end."""
        for rank in list(self.held):
            self.release(rank)

    def _late(self, rank: int, held: list[str]) -> None:
        with self.lock:
            if self.held.get(rank) is held:  # (not a later hold of the same rank)
                self.release(rank)
