"""A distributed job as one target: a client per rank, one rank in view.

It has the same methods as a Client, so the console drives a job like one process:
inspection goes to the rank in view; stepping, LR changes, skip and end go to every
rank (a per-rank LR would silently make the replicas diverge). A pause of the whole
job is "pause at step N" with N past every rank's step, at before_optimizer_step,
so no rank is left inside a collective.
"""

from __future__ import annotations

import os
import re
import signal
from collections import deque
from collections.abc import Callable
from typing import Any

from ..wire import stall_text
from ..wire.last_step import last_of_end, last_reached
from ..wire.numbers import ascii_int
from ..wire.ops import OPS
from ..wire.replay_text import pause_reason
from .connection import OUTPUT_TAIL, Client, Ops
from .replays_heard import own_replay


def odd_ranks(values: list[tuple[int, str]]) -> set[int]:
    """The ranks whose value differs from the rest (`compare`): those off the value most
    ranks share; with no such value, those that are not finite (nan, inf)."""
    counts: dict[str, int] = {}
    for _, v in values:
        counts[v] = counts.get(v, 0) + 1
    common, n = max(counts.items(), key=lambda kv: kv[1], default=("", 0))
    if n > len(values) / 2:
        return {r for r, v in values if v != common}
    return {r for r, v in values if re.search(r"\b(nan|inf)\b", v)}


def parse_ranks(spec: str, world: int) -> list[int]:
    """'0,2-3' -> [0, 2, 3]; 'all' -> every rank."""
    if spec.strip() in ("all", "*"):
        return list(range(world))
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.strip().partition("-")
        first, last = ascii_int(lo), ascii_int(hi or lo)
        if first is None or last is None:
            raise ValueError(f"bad rank set {spec!r}: use e.g. 0,2-3 or all")
        out += range(first, last + 1)
    bad = [r for r in out if r >= world]
    if bad:
        raise ValueError(f"no rank {bad[0]}: the job has ranks 0-{world - 1}")
    return sorted(set(out))


def duration(seconds: float) -> str:
    """12.3 -> '12s', 754 -> '12m 34s', 93784 -> '1d 2h'."""
    s = int(seconds)
    if s < 60:
        return f"{seconds:.0f}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def wait_note(w: dict[str, Any]) -> str:
    """What a rank that makes no progress waits in, and for a collective how long it has."""
    at = f"{os.path.basename(w['file'])}:{w['line']}"
    if not w.get("collective"):
        inner = "" if w["inner"].endswith(f"({at})") else f" in {w['inner']}"
        return f"no progress for {duration(w['idle_s'])}, at {at}{inner}"
    waiting = f"waiting {duration(w['idle_s'])} in {w['collective']} at {at}"
    if w.get("timeout_s") is None:
        return waiting
    if w["timeout_s"] >= 86400:
        return f"no collective timeout while a client is attached · {waiting}"
    return f"{duration(w['left_s'])} left of its {duration(w['timeout_s'])} collective timeout · {waiting}"


def gone_note(exited: dict[str, Any], tail: list[str]) -> str:
    """A dead rank: its exit code (or why there is none), its error and its last output."""
    code = exited.get("exit_code")
    if exited.get("stopped_by"):
        parts = [exited["stopped_by"]]
    elif code is None:
        parts = ["no exit code seen: killed by a signal, os._exit or a crash"]
    elif code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        parts = [f"killed by {name}"]
    else:
        parts = [f"exit code {code}"]
    if exited.get("exit_code_from"):
        parts[0] += f" (from {exited['exit_code_from']})"
    if exited.get("error"):
        lines = exited["error"].strip().splitlines()
        at = next((m for ln in reversed(lines) if (m := re.search(r'File "([^"]+)", line (\d+)', ln))), None)
        parts.append(_clip(lines[-1]) + (f" at {os.path.basename(at.group(1))}:{at.group(2)}" if at else ""))
    last = next((ln.strip() for ln in reversed(tail) if ln.strip()), None)
    if last:
        parts.append(f"last output: {_clip(last)}")
    return "; ".join(parts)


def _clip(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[:width] + "…"


TORCHRUN_LOGS = "stepdbg-torchrun-"  # how the --log-dir a launcher gives torchrun (--tee 3) is named


class TorchrunLog:
    """What torchrun's own output says of each rank, read line by line by a launcher:
    the exit code of the rank that failed (by pid), the signal it sent the others, and
    each rank's last lines (with ``--tee 3`` torchrun prefixes them ``[default0]:``)."""

    # The first failure as it happens, and every failure in the summary torchrun prints last.
    FAILED = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: \d+ \(pid: (\d+)\)|"
                        r"^\s*exitcode\s*: (-?\d+) \(pid: (\d+)\)")
    STOPPING = re.compile(r"Sending process (\d+) closing signal (SIG\w+)")
    PREFIX = re.compile(r"^\[[A-Za-z_]*?(\d+)\]:(.*)$")

    def __init__(self) -> None:
        self.ends: dict[int, dict[str, Any]] = {}
        self.tails: dict[int, deque[str]] = {}
        self.caught_up: Callable[[int], bool] | None = None  # (the launcher's relay) a local rank's lines all out

    def feed(self, line: str) -> None:
        if m := self.PREFIX.match(line):
            if m.group(2).strip():
                self.tails.setdefault(int(m.group(1)), deque(maxlen=OUTPUT_TAIL)).append(m.group(2))
        elif m := self.FAILED.search(line):
            code, pid = (m.group(1), m.group(2)) if m.group(1) is not None else (m.group(3), m.group(4))
            self.ends[int(pid)] = {"exit_code": int(code), "exit_code_from": "torchrun"}
        elif m := self.STOPPING.search(line):
            self.ends[int(m.group(1))] = {"stopped_by": f"torchrun sent {m.group(2)} after a rank failed"}

    def about(self, session: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """(torchrun's word on how this rank ended, its last lines) for a rank's session."""
        return self.ends.get(session.get("pid"), {}), list(self.tails.get(session.get("local_rank"), ()))


def rank_row(rank: int, c: Any, status: dict[str, Any] | None, last: dict[str, Any] | None,
             log: TorchrunLog | None = None) -> dict[str, Any]:
    """One row of the ranks table: running, paused, in collective or dead, and why."""
    row: dict[str, Any] = {"rank": rank, "step": None, "phase": None, "loss": None, "grad_norm": None}
    if c.exited is not None or status is None:
        exited, tail = dict(c.exited or {}), list(c.output_tail)
        if log is not None and "lost" in exited:
            end, tail = log.about(c.session)
            exited.update(end)
            tail = tail or list(c.output_tail)
        step = last_of_end(exited)  # (its own record of its end: the ranks' table kept their last pause's)
        return {**row, "state": "dead" if "lost" in exited or exited.get("exit_code") else "exited", "step": step,
                "phase": "ended" if step is not None else None, "note": gone_note(exited, tail)}
    state, note = status["state"], pause_reason(status.get("paused") or {})
    if status.get("waiting"):
        note = wait_note(status["waiting"])
        if status["waiting"].get("collective"):
            state = "in collective"
    # A paused rank's own numbers are those of the step it is paused in (its break's
    # scalars): the last finished step would show every rank's previous, finite loss.
    now = (status.get("paused") or {}).get("scalars") or last or {}
    return {**row, "state": state, "step": last_reached(status), "phase": status["phase"],  # (the header's step)
            "loss": now.get("loss"), "grad_norm": now.get("grad_norm"), "note": note, "stall": status.get("stall")}


def stall_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The job-wide report of a stall the ranks are still in (from the rank that made it), or {}."""
    return next((r["stall"] for r in rows if r.get("stall")), {})


class RankView:
    """What a front end reads of a job comes from the rank in view (shared by the sync
    Job and the TUI's async JobSource)."""

    clients: list[Any]
    current: int
    targets: list[int] | None = None  # who gets stepping and changes; None: every rank
    many_ranks = True  # (a single client's is False)

    def _to(self) -> list[int]:
        return [r for r in (self.targets if self.targets is not None else range(len(self.clients)))
                if self.clients[r].exited is None]

    def _routed(self, op: str) -> list[int]:
        """Who gets `op`: stepping and changes (the op's broadcast flag) go to every rank that
        gets commands, so that the replicas stay the same; the job's end (whole_job) to every
        live rank, whatever `o` chose (it went to rank 1 alone after `o` 1: the twentieth
        walk's 1); the rest to the rank in view."""
        if OPS[op].whole_job:
            return self._live()
        return self._to() if OPS[op].broadcast else [self.current]

    def _forget_pause(self) -> None:
        """(Each rank's client forgets its own pause when a resuming op goes to it, and keeps
        it where that rank refused: call.)"""

    def _live(self) -> list[int]:
        return [r for r, c in enumerate(self.clients) if c.exited is None]

    def _one_replay(self, answers: dict[int, Any]) -> dict[str, Any]:
        """Every live rank replays at once (a sharded model's forward gathers from every
        rank): the answer that names a producer (the rank that broke), else the rank in
        view's; "ranks" says what each one answered."""
        shown = next((r for r, a in answers.items() if isinstance(a, dict) and a.get("first_nonfinite")),
                     self.current if self.current in answers else next(iter(answers)))
        if isinstance(answers[shown], BaseException):
            raise answers[shown]
        words = {r: (a.get("summary") if isinstance(a, dict) else f"{type(a).__name__}: {a}") for r, a in answers.items()}
        return {**answers[shown], "rank": shown, "ranks": words}

    @property
    def client(self) -> Any:
        return self.clients[self.current]

    @property
    def session(self) -> dict[str, Any]:
        return self.client.session

    @property
    def status_at_attach(self) -> dict[str, Any]:
        return self.client.status_at_attach

    @property
    def paused(self) -> dict[str, Any] | None:
        return self.client.paused

    @property
    def exited(self) -> dict[str, Any] | None:
        """Set once every rank is gone."""
        return self.client.exited if all(c.exited is not None for c in self.clients) else None


class Job(RankView, Ops):
    """Clients of every rank of one job (index = rank): the op table's methods, routed."""

    def __init__(self, clients: list[Client]) -> None:
        self.clients = clients
        self.current = 0
        self.again = ""  # what `stepdbg attach` takes to come back to the whole job (open_job sets it)

    def wait_paused(self, timeout: float | None = None, previous: dict[str, Any] | None = None) -> Any:
        return self.client.wait_paused(timeout, previous)

    def replay(self) -> dict[str, Any]:
        from concurrent.futures import ThreadPoolExecutor

        live = self._live()
        with ThreadPoolExecutor(max(1, len(live))) as pool:  # (each rank's answer kept: its event is not said again)
            futures = {r: pool.submit(own_replay, self.clients[r]) for r in live}
        return self._one_replay({r: f.exception() or f.result() for r, f in futures.items()})

    def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:
        results = []
        for r in self._routed(op):
            kept = self.clients[r]._forget_pause() if OPS[op].resumes else None
            try:
                results.append(self.clients[r].call(op, timeout, **args))
            except Exception as e:
                self.clients[r]._pause_stands(kept, e)
                raise
        return results[0] if results else None

    def __getattr__(self, name: str) -> Any:  # what is not an op (wait_exited, again, eval): the rank in view's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.client, name)

    @property
    def history(self) -> Any:
        return self.client.history

    def pause(self) -> int:
        """Pause every rank together at the next step boundary past all of them."""
        n = max(c.status()["step"] for c in self.clients if c.exited is None) + 1
        for r in self._to():
            self.clients[r].pause_at(n)
        return n

    def rank_table(self) -> list[dict[str, Any]]:
        """Per rank: state (running, paused, in collective, dead), step, phase, and why."""
        rows = []
        for r, c in enumerate(self.clients):
            try:
                st, hist = (c.status(), c.get_history(1)) if c.exited is None else (None, [])
            except ConnectionError:
                st, hist = None, []
            rows.append(rank_row(r, c, st, hist[-1] if hist else None))
        return rows

    def ranks_text(self) -> list[str]:
        """The console's `ranks`: a stall the ranks are still in, explained; then a line per rank."""
        rows = self.rank_table()
        out = stall_text.report_lines(stall_of(rows))
        for row in rows:
            mark = "*" if row["rank"] == self.current else " "
            out.append(f"{mark} rank {row['rank']}: {row['state']:<10} step {row['step']} {row['phase'] or ''}"
                       + (f"  — {row['note']}" if row["note"] else ""))
        return out

    def compare(self, expr: str) -> list[tuple[int, str]]:
        """`expr` evaluated on every rank, to spot the one that differs."""
        out = []
        for r, c in enumerate(self.clients):
            if c.exited is not None:
                out.append((r, "(gone)"))
                continue
            res = c.evaluate(expr)
            out.append((r, (res.get("error") or "").strip().splitlines()[-1] if res.get("error") else str(res["value"])))
        return out

    def close(self, then: str = "stay") -> None:
        for c in self.clients:
            c.close(then=then)
