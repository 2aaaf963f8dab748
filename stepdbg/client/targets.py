"""Finding a job: the local sessions a TARGET names, and where to reach one.

Standard library only; shared by the sync and async clients and by ssh (remote.py).
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from ..wire import sessions

_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """Another program's text with its terminal control sequences and control characters
    taken out (lines and tabs kept): squeue's or a remote ssh's stderr can set a title,
    move the cursor or hide what follows."""
    return _ESCAPES.sub("", text)


class TargetError(Exception):
    """The target could not be found or reached; the message says what to do."""


@dataclass
class Endpoint:
    """Where a session listens and its token; `close` tears down what reaching it took (ssh)."""

    address: str
    token: str
    close: Callable[[], None] | None = None


def gone_line(pid: int, argv: list[str] | None = None) -> str:
    """A job of this machine whose process is gone, its exit code unknowable (no child of
    ours; a kill -9 or a crash let its agent say nothing): under an attach, or found by one."""
    what = f", {' '.join(os.path.basename(a) for a in argv[:2])}" if argv else ""
    return f"the job (pid {pid}{what}) is gone, its exit code unknown (killed by a signal, os._exit or a crash)"


def find_local(target: str | None, clean: bool = True) -> sessions.SessionInfo:
    """The local session a TARGET names (None: the only one). A job gone without a word (its
    session left: kill -9) is said so, once (`clean`: its files are removed then)."""
    gone: list[sessions.SessionInfo] = []
    live = sessions.listing(clean, gone)
    named = [g for g in gone if target in (None, g.id, str(g.pid))]
    if named and not any(target in (None, s.id, str(s.pid)) for s in live):
        raise TargetError("; ".join(gone_line(g.pid, g.argv) for g in named))
    if target is None:
        if not live:
            raise TargetError("no stepdbg session is running here (start one with 'stepdbg serve python train.py')")
        if len(live) > 1:
            raise TargetError("several sessions are running; name one:\n" + format_listing(live))
        return live[0]
    for s in live:
        if target in (s.id, str(s.pid), s.address) or os.path.abspath(target) == s.address:
            return s
    known = ", ".join(s.id for s in live) or "none"
    if target.isdigit():  # a session id is its pid
        raise TargetError(f"no session {target!r} (running: {known}); the job may have ended")
    raise TargetError(f"no session {target!r} (running: {known}): TARGET is a session id or pid (stepdbg ls), "
                      "a job id, a socket path, HOST:PORT, ssh://[user@]host[/session] or slurm:JOB")


def find_job(job: str | None = None) -> list[sessions.SessionInfo]:
    """The local sessions of one distributed job (its ranks), by job id; None: the only job."""
    live = [s for s in sessions.listing() if s.job_id is not None]
    jobs = sorted({s.job_id for s in live})
    if job is None:
        if len(jobs) != 1:
            raise TargetError("no distributed job is running here" if not jobs else
                              f"several jobs are running ({', '.join(jobs)}); name one")
        job = jobs[0]
    ranks = sorted((s for s in live if s.job_id == job), key=lambda s: s.rank or 0)
    if not ranks:
        raise TargetError(f"no job {job!r} (running: {', '.join(jobs) or 'none'})")
    return ranks


def format_listing(infos: list[sessions.SessionInfo], extra: list[tuple[str, list[str]]] | None = None,
                   width: int | None = None) -> str:
    """One row a job, in columns as wide as their widest cell, `extra` columns (a header,
    a cell a job) after the rank, and the command last, whole (its arguments too). In
    `width` columns (None: no limit) a command too long for its column folds between its
    words, beneath itself (or, the column narrower than 24 or than a word of it, on the
    lines under its row): at 80 columns the terminal broke `--sleep 0.3` as `0.` and `3`."""
    extra = extra or []
    table = [["ID", "PID", "HOST", "RANK", *(h for h, _ in extra), "SCRIPT"]] + [
        [s.id, str(s.pid), s.host, "" if s.rank is None else f"{s.rank}/{s.world_size}",
         *(cells[i] for _, cells in extra), " ".join(s.argv[1:])]
        for i, s in enumerate(infos)]
    n = len(table[0]) - 1
    widths = [max(len(row[i]) for row in table) for i in range(n)]
    lines = []
    for row in table:
        left = "  ".join(c.ljust(w) for c, w in zip(row[:n], widths, strict=True)) + "  "
        room = (width - len(left)) if width else 0
        if not width or len(left) + len(row[n]) <= width:
            lines.append((left + row[n]).rstrip())
        elif room >= max(MIN_SCRIPT_COLUMN, *(len(w) for w in row[n].split())):
            lines.extend(fold(row[n], width, left, " " * len(left)))
        else:  # (a path wider than the column: every line's width)
            lines.extend([left.rstrip(), *fold(row[n], width, "  ", "  ")])
    return "\n".join(lines)


MIN_SCRIPT_COLUMN = 24  # narrower, a row's command goes beneath it


def fold(text: str, width: int | None, first: str = "", rest: str = "  ") -> list[str]:
    """`text` in `width` columns (None: one line), broken between words only (a path longer
    than a line stays whole on its own)."""
    if not width:
        return [first + text]
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False) or [first]


def job_lines(infos: list[sessions.SessionInfo], width: int | None = None) -> list[str]:
    """One line a distributed job (folded in `width` columns): its ranks here, the nodes they run on, how to attach."""
    out = []
    for job in sorted({s.job_id for s in infos if s.job_id is not None and (s.world_size or 1) > 1}):
        ranks = sorted((s for s in infos if s.job_id == job), key=lambda s: s.rank or 0)
        nodes: dict[str, list[int]] = {}
        for s in ranks:
            nodes.setdefault(s.host, []).append(s.rank or 0)
        on = ", ".join(f"{host} (rank{'s' if len(rs) > 1 else ''} {','.join(map(str, rs))})"
                       for host, rs in nodes.items())
        out.extend(fold(f"job {job}: {len(ranks)} of {ranks[0].world_size} ranks, on {on} · stepdbg attach {job}", width))
    return out
