"""The Bus: how whatever the agent sees is told, in one place.

Every event goes three ways: to the listeners (the server, which tells the clients), to
the JSON-lines report, and as one line on the job's stderr (prefixed with the rank under
torchrun). A listener that fails is said and skipped; nothing here raises into the loop.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from stepdbg.agent.report import Report, rank_path
from stepdbg.wire.change_text import change_said
from stepdbg.wire.fold import for_terminal
from stepdbg.wire.numbers import env_int


def rank_of_job() -> int | None:
    """This process's rank in a distributed job of more than one rank, else None."""
    rank, world = env_int("RANK"), env_int("WORLD_SIZE")
    return rank if rank is not None and world not in (None, 1) else None


SAID = {"break", "finding", "change", "replay"}  # the events said in words (on stderr, in a TUI's Log)


def flush_job_output() -> None:
    """The job's stdout and stderr out of their buffers, so that what stepdbg says next
    comes after the lines the job printed before it (a block-buffered pipe held them)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a script's own stream object may refuse
            if stream is not None:
                stream.flush()


class Bus:
    """Listeners, the report and the stderr line; the log of changes made by front ends."""

    def __init__(self, report: str | None, quiet: bool, step: Callable[[], int],
                 between_steps: Callable[[], bool] = lambda: False) -> None:
        rank = rank_of_job()
        if rank is not None:
            self.report = Report(rank_path(report, rank) if report else None, {"rank": rank})
        else:
            self.report = Report(report)
        self.quiet = quiet
        self.prefix = "stepdbg" if rank is None else f"stepdbg[rank {rank}]"
        self._step = step
        self._between_steps = between_steps  # running between steps: the step's number is the next one's
        # Called with (event, data) on the thread where it happens: "break", "paused",
        # "resumed", "step", "change", "replay", "finding", "output".
        self.listeners: list[Callable[[str, Any], None]] = []
        self.changes: list[dict[str, Any]] = []

    def emit(self, event: str, data: Any) -> None:
        """Tell every listener. What is told in words (a break, a finding, a change, a replay)
        is told after what the job printed before it is out of its buffers (a pipe's stdout
        holds 8 KB: the lines before a pause came after it, and a later step's finding
        before the job's own earlier lines)."""
        if event in SAID:
            flush_job_output()
        for listener in list(self.listeners):
            try:
                listener(event, data)
            except Exception as e:  # a listener must never reach the training loop
                self.say(f"event listener failed: {type(e).__name__}: {e}")

    def say(self, msg: str) -> None:
        """One line on the job's stderr, written whole: print writes the text and its newline
        apart, and where sys.stderr is a Python object (a script's tee, a logger) another
        thread's line could land between them ("dropped a client: Xdropped a client: Y")."""
        stream = sys.stderr
        if not self.quiet and stream is not None:  # (None: a process started without one)
            flush_job_output()  # (the job's own lines before it come first, stdout's too)
            stream.write(for_terminal(f"{self.prefix}: {msg}", stream) + "\n")  # under torchrun the prefix says which rank
            stream.flush()

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        return self.report.write(event, **fields)

    def change(self, what: str, **fields: Any) -> dict[str, Any]:
        """A change made to the job (LR, a breakpoint, a rewind): logged, written, told, said
        in the words of wire/change_text (the one place: the console and the Log say the
        same). Made while the job
        runs between steps, its `step` is the next one's, not begun: `between_steps` says so
        (the front ends say 'after step N-1', as their headers do)."""
        rec = {"what": what, "step": self._step(), **({"between_steps": True} if self._between_steps() else {}),
               **fields}
        self.changes.append(rec)
        self.report.write("change", **rec)
        self.emit("change", rec)
        self.say(f"change: {change_said(rec)}")  # (not `break_remove spec=nan`)
        return rec

    def finding(self, f: Any, said: bool = False) -> None:
        """A diagnostic rule's finding (doctor); `said`: its words are on stderr already (a
        replay's finding is the replay's own lines, which the doctor printed twice)."""
        self.report.write("finding", **asdict(f))
        self.emit("finding", asdict(f))
        if not said:
            self.say(f"finding [{f.rule}] {f.message} — try: {f.advice}")

    def hook_failed(self, name: str, e: BaseException) -> None:
        self.say(f"internal error in the {name} hook, which is now off: {type(e).__name__}: {e}")
        self.report.write("error", hook=name, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
