"""The header line: which job (pid, rank, script and its arguments, host) on the left, the
clock, step, phase and state on the right, fitted to the header's own width whenever it
changes."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

# What the header keeps when it can, first to last, each part whole (never a cut word): the
# pid, the clock, the script's arguments (as many whole ones as fit, an option with its
# value, then `…`), the host; each is put in where the width left has room for it. Then
# the state's end (a long break condition, which the Break panel says whole) is cut. The
# rank and the script's name stay. (The reverse order is the order they give way in.)
MORE = "…"  # after the arguments shown, where some are left out


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


def last_reached(status: dict[str, Any]) -> Any:
    """The step the header names: the last one the job reached. Running between steps the
    status's step is the next one's number, not reached yet (at the end `step 60` after steps
    0 to 59): the one before it, which ran to its end. Paused, the job's own number."""
    step = status.get("step")
    if status.get("phase") == "between steps" and status.get("state") != "paused" and isinstance(step, int) \
            and step > 0:
        return step - 1
    return step


def _state(status: dict[str, Any], connection: str) -> Text:
    # After the end the phase is "ended", which the connection's words say ("job ended, exit code 130").
    step = last_reached(status)
    if _ended(status):
        right = Text(f"step {step} · ")
    elif step != status.get("step"):  # between steps: the one that ran to its end
        right = Text(f"after step {step} · ")
    else:
        right = Text(f"step {step} · {status.get('phase', '?')} · ")
    paused = status.get("paused")
    if connection != "connected":
        right.append(connection, style="bold red")
    elif status.get("state") == "paused" and paused:
        right.append(f"PAUSED [{paused.get('condition')}]", style="bold black on yellow")
    else:
        right.append(str(status.get("state", "?")).upper(), style="bold green")
    return right


def render_header(session: dict[str, Any], status: dict[str, Any], elapsed: float, connection: str,
                  width: int | None = None) -> Text:
    """The header in `width` columns (None: not laid out yet, everything shown). The script's
    name stays whole: the pid, clock, arguments and host are put in, in that order, each where it still fits."""
    name, arguments = _script(session.get("argv") or [])
    rank = f" rank {session['rank']}/{session['world_size']}" if session.get("rank") is not None else ""
    clock = f"{int(elapsed // 3600):02d}:{int(elapsed % 3600 // 60):02d}:{int(elapsed % 60):02d} · "
    right = _state(status, connection)
    pid = f"pid {session.get('pid')}"
    host = f" @ {session.get('host')}" if session.get("host") else ""
    # After the end no clock: it would count on from a job that is gone (and it took the host's room).
    parts: dict[str, str] = {"pid": "", "clock": "", "argument": "", "host": ""}

    def left_words() -> str:
        # The pid first: it is what `stepdbg attach` and `kill` need.
        words = f"{parts['pid']}{rank}".strip()
        script = f"{name}{parts['argument']}{parts['host']}"
        return f"{words}  {script}" if words else script

    def fits() -> bool:
        return width is None or len(left_words()) + 1 + len(parts["clock"]) + right.cell_len <= width

    def put(part: str, words: str) -> bool:
        parts[part] = words
        if not fits():
            parts[part] = ""
        return bool(parts[part])

    put("pid", pid)
    put("clock", "" if _ended(status) else clock)
    for n in range(len(arguments), -1, -1):  # as many whole arguments as fit, then `…` for the rest
        if put("argument", "".join(f" {a}" for a in arguments[:n]) + (f" {MORE}" if n < len(arguments) else "")):
            break
    put("host", host)
    left = Text(left_words(), style="bold")
    if parts["clock"]:
        right = Text(parts["clock"]) + right
    if width is None:
        return Text.assemble(left, "  ", right)
    if left.cell_len + 1 + right.cell_len > width:  # the state's end gives way, then the left's
        right.truncate(max(width - left.cell_len - 1, 0), overflow="ellipsis")
        left.truncate(width - right.cell_len - (1 if right.cell_len else 0), overflow="ellipsis")
    gap = width - left.cell_len - right.cell_len
    return Text.assemble(left, " " * max(gap, 1 if right.cell_len else 0), right, no_wrap=True, overflow="crop")


class JobHeader(Static):
    """The header line; drawn again at its own width whenever that changes (the first
    drawing comes before the layout knows the width)."""

    shown: tuple[dict[str, Any], dict[str, Any], float, str] | None = None  # what it shows, last set

    def show(self, session: dict[str, Any], status: dict[str, Any], elapsed: float, connection: str) -> None:
        self.shown = (session, status, elapsed, connection)
        self.update(render_header(session, status, elapsed, connection, self.content_region.width or None))

    def on_resize(self) -> None:
        if self.shown is not None:
            self.show(*self.shown)
