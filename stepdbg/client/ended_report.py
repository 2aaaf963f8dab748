"""torchrun's failure report of ranks that ended as the person asked (q, end, the TUI's
Ctrl-C), in one line: the terminal's after the TUI (feed), the TUI's Log (fold; after Ctrl-C
then i it filled the Log with dozens of torchrun's lines, the eighteenth walk's 6)."""

from __future__ import annotations

import re

from .job import TorchrunLog
from .said_once import SaidOnce

SIGINT_ENDS = (-2, 130)  # a rank ended by SIGINT (torchrun's word), or by its KeyboardInterrupt's exit
# torchrun Ctrl-C'd while it runs its ranks: its warning, then its own traceback's last line (the
# twentieth walk's 1: some 60 lines of torchrun's after the ranks' one line each, and exit 1).
DEATH_SIGNAL = re.compile(r"Received \d+ death signal, shutting down workers")
# A frame of torchrun's own code: its entry and its elastic agent, never in a rank's stack (a
# rank's traceback runs through torch/distributed/ where the script was in dist.all_reduce, or
# wrapped by elastic's @record: taken for torchrun's, the user's traceback was hidden).
TORCHRUNS = ("/bin/torchrun\"", "torch/distributed/run.py\"", "torch/distributed/launcher/",
             "torch/distributed/elastic/agent/", "torch/distributed/elastic/multiprocessing/api.py\"")
HELD_MOST = 1_000  # a traceback's lines held at most (torchrun's of a Ctrl-C is some 60): past it, not torchrun's
CHAINED = ("", "During handling of the above exception, another exception occurred:")
SIGNALLED = re.compile(r"^torch\.distributed\.elastic\.multiprocessing\.api\.SignalException: Process \d+ got signal: 2$"
                       r"|^KeyboardInterrupt$")  # (before torchrun's handler: Python's own, at its start)


class EndedReport:
    """After the user ends a torchrun job (q, end), every rank exits with code 3 on purpose.
    torchrun calls that a failure: a log line per rank, its own traceback and a table of
    failures. Once `ended` is set, those lines give way to one line that says what
    happened; anything else (another exit code, any other traceback) passes unchanged.
    With `auto` (a job run without the TUI, where --on-break abort may end it) the report is
    held to its end and replaced when its root cause is a rank that ended with `code`.
    torchrun's `Sending process N closing signal SIGTERM` to the ranks left (its warning
    before the report, which got through: the ninth walk's 4) goes with the report. And the
    ranks' lines of one break of the job, or of a note to the person, are said once (said_once)."""

    def __init__(self, code: int = 3, auto: bool = False) -> None:
        self.code, self.auto = code, auto
        self.ended = False
        self.interrupted = False  # the TUI sent the ranks Ctrl-C (i): their SIGINT end is as asked
        self.hid = False  # a failure report was replaced: the ranks ended as asked
        self._held: list[str] = []  # a traceback's lines until it is known to be torchrun's
        self._report: list[str] = []  # torchrun's traceback and table, until its end
        self._rules = -1  # "=====" lines of the failure table seen; -1 outside it
        self._stopping: list[str] = []  # torchrun's SIGTERM to the ranks left, until the report says why
        self.once = SaidOnce()
        self.signalled = False  # torchrun's own traceback of a Ctrl-C was folded (SIGNALLED)

    def feed(self, line: str) -> list[str]:
        """The lines to print for one line of torchrun's output."""
        return self.fold(line) if self.once.shown(line) else []

    def fold(self, line: str) -> list[str]:
        """`line`, or what stands for torchrun's report of ranks that ended as asked (the
        TUI's Log: every line its own, none said once here)."""
        if not self.ended and not self.auto and not self.interrupted:
            return [line]
        if self._rules >= 0:
            return self._in_report(line)
        if self._held:
            return self._in_traceback(line)
        if line == "Traceback (most recent call last):":
            self._held = [line]
            return []
        if self.signalled and line in CHAINED:  # (between the tracebacks of two Ctrl-C's)
            return []
        if TorchrunLog.STOPPING.search(line) or self.interrupted and DEATH_SIGNAL.search(line):
            self._stopping += [] if self.ended else [line]
            return []
        m = TorchrunLog.FAILED.search(line)
        if m and int(m.group(1) if m.group(1) is not None else m.group(3)) in self._asked():
            return []
        return self._after_stopping([line])

    def _in_traceback(self, line: str) -> list[str]:
        """A line after a traceback's first: torchrun's report, its own traceback of a Ctrl-C
        (one line), or another's traceback, shown whole."""
        if line.startswith(" ") and len(self._held) < HELD_MOST:
            self._held.append(line)
            return []
        if line.startswith(" "):  # (a rank's output after a line like a traceback's first: shown)
            held, self._held = [*self._held, line], []
            return self._after_stopping(held)
        if "ChildFailedError" in line:
            self._report, self._held, self._rules = [*self._held, line], [], 0
            return []
        if self.interrupted and SIGNALLED.search(line) and any(t in h for h in self._held for t in TORCHRUNS):  # torchrun's own
            # (a rank's traceback, unprefixed without --tee, is the user's: shown, as under plain torchrun)
            said, self.signalled = self.signalled, True  # (a second Ctrl-C: a chained traceback, said once)
            self._held, self._stopping, self.hid, self.code = [], [], True, 130
            return [] if said else ["stepdbg: torchrun and its ranks were ended by the Ctrl-C (torchrun's "
                                    "traceback of it is not shown)"]
        held, self._held = self._held + [line], []
        return self._after_stopping(held)

    def end(self) -> list[str]:
        """At the end of the stream: what is held still (a traceback or a report the stream
        cut before its last line, torchrun's SIGTERM lines no report followed), as it came."""
        held, self._held, self._report, self._rules = [*self._held, *self._report], [], [], -1
        return self._after_stopping(held) if held or self._stopping else []

    def _in_report(self, line: str) -> list[str]:
        """A line of torchrun's failure report: at its end the report, or one line for it."""
        self._report.append(line)
        self._rules += line.startswith("=" * 20)
        if self._rules < 2:
            return []
        self._rules = -1
        report, self._report = self._report, []
        root = self._root_code(report)
        if not self.ended and root not in self._asked():
            return self._after_stopping(report)
        self.hid, self._stopping = True, []
        if root in SIGINT_ENDS and self.interrupted and not self.ended:
            return ["stepdbg: the ranks were ended by the Ctrl-C sent to the job, after their own Ctrl-C handling "
                    "ran (torchrun reports that as a failure; its report is not shown)"]
        why = "as asked from the TUI" if self.ended else "as stepdbg ended it"
        return [f"stepdbg: the job ended with exit code {self.code}, {why} "
                "(torchrun reports that as a failure; its report is not shown)"]

    def _asked(self) -> set[int]:
        """The exit codes of ranks that ended as asked: stepdbg's end (`code`), a Ctrl-C's."""
        return {*((self.code,) if self.ended or self.auto else ()), *(SIGINT_ENDS if self.interrupted else ())}

    def _after_stopping(self, lines: list[str]) -> list[str]:
        """`lines`, after torchrun's SIGTERM lines held (not a report of ranks ended as asked)."""
        stopping, self._stopping = self._stopping, []
        return [*stopping, *lines]

    @staticmethod
    def _root_code(report: list[str]) -> int | None:
        """The exit code of the "Root Cause (first observed failure)" in torchrun's table."""
        root = next((i for i, ln in enumerate(report) if ln.startswith("Root Cause")), None)
        for ln in report[root or len(report):]:
            if m := re.match(r"\s*exitcode\s*: (-?\d+)", ln):
                return int(m.group(1))
        return None
