"""The header line: which job (pid, rank, script and its arguments, host) on the left, the
clock, step, phase and state on the right, fitted to the header's own width whenever it
changes."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual.widgets import Static

from stepdbg.wire.last_step import last_reached
from stepdbg.wire.rank_words import ranks_words

# What the header keeps when it can, first to last, each part whole (never a cut word): a lost
# connection's reason, the break's condition (its first word: `PAUSED [grad_norm>200]` is why
# the job stopped, and went before the host at 80 columns, the twelfth walk's 2), the pid, the
# clock, the condition's further words (as many whole words as fit, then `…`: the Break panel
# says it whole), the script's arguments (as many whole ones as fit, an option with its value,
# then `…`), the host (` @ vm`, else ` @vm`); each is put in where the width left has room for
# it. The rank, the script's name and the state stay. The reverse order is the order they give
# way in: the host first, then the arguments, the condition's later words, the clock, the pid,
# the condition. The clock keeps its room as it counts (clock_room: nothing gives way to it
# then). The clock has one spelling in every run and width (`8s`, `12m34s`, `1h02m03s`: it was
# `00:00:08` where there was room and `21s` where not, the twelfth walk's 2).
MORE = "…"  # after the arguments shown, where some are left out
# The condition of a pause asked for (p, n, s): `PAUSED [pause]` said it twice, and at 80
# columns it put the host out (`@ vm`, the fifth walk's 12); the header says `PAUSED`.
ASKED = "pause"
# The blank columns between the job (left) and its state (right) at the least: as wide as the
# two between the rank and the script, so that the two sides never read as one (at a single
# column, `ddp_nan.py @vm step 6` and `ddp_nan.py 26s · step 6`: the ninth walk's 5).
GAP = 2


def _script(argv: list[str]) -> tuple[str, list[str]]:
    """The script's name (`-m pkg.train` for a module) and its arguments, each an option
    with its value (`--steps 100`) or a word alone; a path is named by its last part."""
    if len(argv) < 2:
        return "?", []
    name, rest = (f"-m {argv[2]}", argv[3:]) if argv[1] == "-m" and len(argv) > 2 else (
        argv[1].rsplit("/", 1)[-1], argv[2:])
    groups: list[str] = []
    for word in (w.rsplit("/", 1)[-1] or w for w in rest):
        if groups and groups[-1].startswith("-") and " " not in groups[-1] and "=" not in groups[-1] \
                and not word.startswith("-"):
            groups[-1] += f" {word}"  # the option's value stays with it
        else:
            groups.append(word)
    return name, groups


def _ended(status: dict[str, Any]) -> bool:
    return str(status.get("state", "")).startswith("exited")


def _condition(paused: dict[str, Any], words: int | None) -> str:
    """The break's condition, whole (`words` None) or its first `words` words and `…`; none
    for 0."""
    cond = str(paused.get("condition"))
    if words == 0:
        return ""
    parts = cond.split()
    return cond if words is None or words >= len(parts) else " ".join([*parts[:words], MORE])


def phase_words(status: dict[str, Any]) -> str:
    """Where the job is: at a pause, where its break is (an exception raised inside a forward
    left the status at `after_forward`: the forward never ended), else the status's phase."""
    brk = status.get("paused") if status.get("state") == "paused" else None
    if not isinstance(brk, dict) or not brk.get("phase"):
        return str(status.get("phase", "?"))
    module = ((brk.get("details") or {}).get("module") or {}).get("name")
    if brk["phase"] == "exception" and module:
        return f"in {module}'s forward"  # (the condition beside it says the exception)
    return str(brk["phase"])


def _state(status: dict[str, Any], connection: str, words: int | None = None) -> Text:
    # After the end the phase is "ended", which the connection's words say ("job ended, exit code 130").
    step = last_reached(status)
    if _ended(status):
        right = Text(f"step {step} · ")
    elif step != status.get("step"):  # between steps: the one that ran to its end
        right = Text(f"after step {step} · ")
    else:
        right = Text(f"step {step} · {phase_words(status)} · ")
    paused = status.get("paused")
    if connection != "connected":
        right.append(connection, style="bold red")
    elif status.get("state") == "paused" and paused and paused.get("condition") == ASKED:
        right.append("PAUSED", style="bold black on yellow")  # (as asked: the Break panel says by p, n or s)
    elif status.get("state") == "paused" and paused:
        said = _condition(paused, words)
        right.append(f"PAUSED [{said}]" if said else "PAUSED", style="bold black on yellow")
    elif status.get("ending") and status.get("state") == "running":  # an uncaught exception goes on
        right = Text(f"step {step} · {status['ending']} not caught · ")
        right.append("ENDING", style="bold red")
    elif status.get("pausing") and status.get("state") == "running":  # p: a pause asked for, on its way
        right.append("PAUSING (p)", style="bold black on yellow")
    else:
        right.append(str(status.get("state", "?")).upper(), style="bold green")
    return right


def _gone(connection: str) -> bool:
    """The connection's words say the job is gone (job_gone.gone_header)."""
    return connection.partition(": ")[2].endswith(" gone")


def connection_levels(connection: str) -> list[list[str]]:
    """A lost connection's spellings, most first: its words, else those before its reason,
    `connection lost` (cut at 80 columns it said `the connection to the jo…`, the ninth walk's
    3). A job gone (job_gone.gone_header, `connection lost: job (pid N) gone`) keeps `gone`:
    `job gone` (`connection lost` alone was the header's at 80 columns, at
    `before_optimizer_step`, while the toast and the REPL line said the job was gone: the
    walk of 08:30's 3)."""
    head, _, reason = connection.partition(": ")
    if _gone(connection):
        return [[connection], [re.sub(r" \(pid [^)]*\)", "", reason)]]  # (the pid: the header's left says it)
    return [[connection], [head]]


def clock_words(elapsed: float) -> str:
    """The clock, one spelling whatever the width: `20s · `, `12m34s · `, `1h02m03s · `."""
    h, m, s = int(elapsed // 3600), int(elapsed % 3600 // 60), int(elapsed % 60)
    return f"{h}h{m:02d}m{s:02d}s · " if h else f"{m}m{s:02d}s · " if m else f"{s}s · "


def clock_room(elapsed: float) -> str:
    """The clock in the room it keeps: as wide as its widest spelling before its hours gain a
    digit (`59m59s · ` under an hour), blanks before it. The parts fitted after it (the
    host, the arguments, the condition's further words) keep their place as it counts: the
    host was shown at 5 s and gone at 11 s (the eighteenth walk's leftovers, 6). Putting the
    host ahead of the clock instead let a cluster's long host name push out the clock and
    the condition."""
    widest = 3599 if elapsed < 3600 else 10 ** len(str(int(elapsed // 3600))) * 3600 - 1
    return clock_words(elapsed).rjust(len(clock_words(widest)))


def targets_levels(targets: Sequence[int] | None) -> list[list[str]]:
    """Who gets stepping and changes, beside the rank in view, where `o` chose some ranks (`n`
    moved rank 1 alone while the header said `rank 0/2`, nothing on screen said so: the
    twentieth walk's 1): one level, never left out, as widely spelt as fits (the Ranks panel
    names them all)."""
    if targets is None:
        return [[""]]
    who = ranks_words(targets)
    return [[f" · stepping and changes go to {who}", f" · commands to {who}", f" · keys to {who}",
             *([f" · keys to {len(set(targets))} ranks"] if len(set(targets)) > 1 else [])]]


def _levels(session: dict[str, Any], status: dict[str, Any], elapsed: float, arguments: list[str],
            connection: str, targets: Sequence[int] | None = None) -> dict[str, list[list[Any]]]:
    """Each part's levels, most first, each level its spellings, widest first; the last level
    is the part left out. After the end no clock: it would count on from a job that is gone
    (and it took the host's room); nor once the job is gone (kill -9: it counted on). The condition: whole (None), its first words then `…`, or
    none (0: `PAUSED` alone; `PAUSED […]` said nothing, the seventh walk's 2; the Break
    panel says it whole). The host as ` @vm` where ` @ vm` does not fit (the sixth walk's 6)."""
    asked = (status.get("paused") or {}).get("condition")
    condition = [] if asked == ASKED else str(asked or "").split()
    host = session.get("host")
    return {
        "connection": connection_levels(connection),
        "targets": targets_levels(targets),
        "pid": [[f"pid {session.get('pid')}"], [""]],
        "clock": [[""]] if _ended(status) or _gone(connection) else [[clock_room(elapsed)], [""]],
        "condition": [[None], *([n] for n in range(len(condition) - 1, 0, -1)), [0]] if condition else [[None]],
        "argument": [*([("".join(f" {a}" for a in arguments[:n]) + (f" {MORE}" if n < len(arguments) else ""))]
                       for n in range(len(arguments), -1, -1)), *([[""]] if arguments else [])],
        "host": [[f" @ {host}", f" @{host}"], [""]] if host else [[""]],
    }


# The turns the parts are put in (the order above), each a part and whether it is put in at its
# least (the condition's first word; its further words have their own, later turn).
TURNS = (("connection", False), ("condition", True), ("pid", False), ("clock", False), ("condition", False),
         ("argument", False), ("host", False))


def _fit(levels: dict[str, list[list[Any]]], fits: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Each part as fully as it fits in its narrowest spelling, in their turns (TURNS); then
    each as wide as the columns left allow, in order (a part that fits in a narrower spelling
    of those before it is never left out beside blank columns: the seventh walk's 1)."""
    parts = {part: options[-1][-1] for part, options in levels.items()}
    chosen = {part: len(options) - 1 for part, options in levels.items()}
    for part, least in TURNS:
        last = len(levels[part]) - 1  # (the part left out)
        for level in range(max(last - 1, 0) if least else 0, min(last, chosen[part])):
            if fits({**parts, part: levels[part][level][-1]}):
                parts[part], chosen[part] = levels[part][level][-1], level
                break
    for part, options in levels.items():
        parts[part] = next((s for s in options[chosen[part]] if fits({**parts, part: s})), parts[part])
    return parts


def rank_views(source: Any, status: dict[str, Any]) -> list[dict[str, Any]]:
    """In a job of many ranks paused, the status of each other rank paused, as its header would
    say it (its own pause: `PAUSED [rank 1]` on rank 0, `PAUSED [nan]` on rank 1)."""
    if not getattr(source, "many_ranks", False) or status.get("state") != "paused":
        return []
    pauses = [getattr(c, "paused", None) for r, c in enumerate(getattr(source, "clients", None) or [])
              if r != getattr(source, "current", None) and getattr(c, "exited", None) is None]
    return [{**status, "paused": p, "step": p.get("step"), "phase": p.get("phase")}
            for p in pauses if isinstance(p, dict)]


def render_header(session: dict[str, Any], status: dict[str, Any], elapsed: float, connection: str,
                  width: int | None = None, others: Sequence[dict[str, Any]] = (),
                  targets: Sequence[int] | None = None) -> Text:
    """The header in `width` columns (None: not laid out yet, everything shown). The script's
    name and the state stay whole: the other parts are put in, in their turns, each as fully
    as it still fits (_fit) the header of the rank in view and of every rank in `others`
    (rank_views): one spelling whichever rank is in view (the pid on rank 1's, whose `[nan]`
    left it room, and the clock in its place on rank 0's `[rank 1]`: the closing walk's 12).
    `targets`: the ranks `o` chose (None: every rank), said after the rank (targets_levels)."""
    name, arguments = _script(session.get("argv") or [])
    rank = f" rank {session['rank']}/{session['world_size']}" if session.get("rank") is not None else ""

    def drawn(parts: dict[str, Any], st: dict[str, Any] = status) -> tuple[str, Text]:
        # The pid first: it is what `stepdbg attach` and `kill` need.
        words = f"{parts['pid']}{rank}{parts['targets'] if rank else ''}".strip()
        script = f"{name}{parts['argument']}{parts['host']}"
        return f"{words}  {script}" if words else script, Text(parts["clock"]) + _state(st, parts["connection"],
                                                                                         parts["condition"])

    def fits(parts: dict[str, Any]) -> bool:
        return width is None or all(len(left) + GAP + right.cell_len <= width
                                    for left, right in (drawn(parts, st) for st in (status, *others)))

    left_words, right = drawn(_fit(_levels(session, status, elapsed, arguments, connection,
                                               None if _ended(status) else targets), fits))
    left = Text(left_words, style="bold")
    if width is None:
        return Text.assemble(left, "  ", right)
    if left.cell_len + GAP + right.cell_len > width:  # the state's end gives way, then the left's
        right.truncate(max(width - left.cell_len - GAP, 0), overflow="ellipsis")
        left.truncate(max(width - right.cell_len - (GAP if right.cell_len else 0), 0), overflow="ellipsis")
    gap = width - left.cell_len - right.cell_len
    return Text.assemble(left, " " * max(gap, GAP if right.cell_len else 0), right, no_wrap=True, overflow="crop")


class JobHeader(Static):
    """The header line; drawn again at its own width whenever that changes (the first
    drawing comes before the layout knows the width)."""

    shown: tuple[dict[str, Any], dict[str, Any], float, str, Sequence[dict[str, Any]]] | None = None  # (last set)

    def show(self, session: dict[str, Any], status: dict[str, Any], elapsed: float, connection: str,
             others: Sequence[dict[str, Any]] = ()) -> None:
        self.shown = (session, status, elapsed, connection, others)
        targets = getattr(getattr(self.app, "source", None), "targets", None)  # (`o`'s choice: None, every rank)
        self.update(render_header(session, status, elapsed, connection, self.content_region.width or None, others,
                                  targets))

    def on_resize(self) -> None:
        if self.shown is not None:
            self.show(*self.shown)
