"""The two jobs of `stepdbg diff` (diff.py), from their start to their end: each in a
process group of its own (its DataLoader workers with it), watched until it exits with a
progress line now and then and a timeout, and ended with its whole group, also when
`stepdbg diff` itself is stopped by a signal (StopOnSignal)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

from ..wire import settings
from ..wire.fold import say

PROGRESS_AT_TERMINAL = 2.0  # seconds between progress lines when stderr is a terminal
PROGRESS_ELSE = 30.0  # otherwise (a log, CI): a line once a run has taken this long, and as often after
PROGRESS_EVERY = "STEPDBG_DIFF_PROGRESS_EVERY"  # sets PROGRESS_ELSE (a test's short wait)
settings.SECONDS[PROGRESS_EVERY] = (PROGRESS_ELSE, False, "how long between stepdbg diff's progress lines "
                                    "when stderr is no terminal")
settings.seconds(PROGRESS_EVERY)  # a bad value: SettingError, one line, before a job starts (diff imports us first)
GRACE = 3.0  # seconds a job's process group has after SIGTERM, before SIGKILL
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None  # (loaded here, not in a forked child)


class TimedOut(Exception):
    """A job ran past --timeout (it is still running: end_group ends it)."""


class Stopped(BaseException):
    """A signal to end `stepdbg diff` (a BaseException: no `except Exception` keeps it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class StopOnSignal:
    """The handler of SIGINT, SIGTERM and SIGHUP: the first raises Stopped where the main
    thread is (waiting on a job, most likely); later ones are noted only, so the cleanup
    they interrupt (ending the jobs, removing the folder) runs to its end."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.holding = False

    def __call__(self, signum: int, _frame: object) -> None:
        if self.signum is None:
            self.signum = signum
        if not self.holding:
            self.holding = True
            raise Stopped(signum)


def adopt_orphans() -> None:
    """Linux: `stepdbg diff` becomes its jobs' subreaper (PR_SET_CHILD_SUBREAPER): a process a
    job started in a session of its own (setsid: a server, a daemon) outlives the job's
    process group, and comes to us, not to init, when its parent ends; end_orphans ends it."""
    if _LIBC is not None:
        _LIBC.prctl(36, 1)


def end_orphans(rounds: int = 100) -> None:
    """Every job is ended and reaped: what is still our child came to us as an orphan of one
    (adopt_orphans) and is killed and reaped, with what it started in turn."""
    if _LIBC is None:
        return
    for _ in range(rounds):
        orphans = _children()
        if not orphans:
            return
        for pid in orphans:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _children() -> list[int]:
    """Our child processes, from /proc (each process's parent, read from its stat line)."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:  # (ended meanwhile)
            continue
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


def in_child() -> None:
    """In the job, before exec: signals as a job gets them, and killed if we are (SIGKILL)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def watch(label: str, proc: subprocess.Popen[bytes], record: str, n: int, timeout: float) -> None:
    """Wait until the job exits (left unreaped: its pid keeps its process group's id ours);
    a progress line now and then; TimedOut at the timeout."""
    start = time.monotonic()
    every = PROGRESS_AT_TERMINAL if sys.stderr.isatty() else settings.seconds(PROGRESS_EVERY) or PROGRESS_ELSE
    due = start + every
    steps_done = StepCount(record)
    # The wait, said once, in the first line (not `ended at`: it runs on); later lines say the progress alone
    limit = f" (waits for it up to --timeout {timeout:g} s)" if timeout else ""
    while not _exited(proc):
        now = time.monotonic()
        if timeout and now - start >= timeout:
            raise TimedOut(f"{label} did not finish within --timeout {timeout:g} s ({steps_done.words(n)}); "
                            "it was ended")
        if now >= due:
            say(f"{label}: still running after {now - start:.0f} s: {steps_done.words(n)}{limit}")  # (folded)
            due, limit = now + every, ""
        time.sleep(0.1)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """The job has exited; it stays a zombie until end_group reaps it."""
    if proc.returncode is not None:
        return True
    if not hasattr(os, "waitid"):  # macOS before Python 3.13: reaped now (its group's id may then be reused)
        return proc.poll() is not None
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """End the job's process group: SIGTERM, GRACE seconds for the job to exit, then
    SIGKILL to whatever is left of the group (workers); the job reaped last, so the
    group's id is still its own when it is signalled."""
    if proc.returncode is not None:
        return
    if not _exited(proc):
        _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE
        while not _exited(proc) and time.monotonic() < deadline:
            time.sleep(0.05)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class StepCount:
    """The training steps a running job has recorded so far: its record's step lines,
    read as they are written (a few KB a poll, from where the last read ended)."""

    def __init__(self, path: str) -> None:
        self.path, self.offset, self.steps, self.started, self._rest = path, 0, 0, False, b""

    def words(self, n: int) -> str:
        self._read()
        if not self.started:
            return "its script has not started under stepdbg yet"
        return f"{self.steps} of {n} step{'s' if n != 1 else ''} recorded"

    def _read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read(1 << 20)
        except OSError:
            return
        self.started = True
        self.offset += len(data)
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()[-4096:]  # (a step line is short; an entry's tail is not needed)
        self.steps += sum(1 for x in lines if x.startswith(b'{"kind": "step"'))
