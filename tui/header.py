"""The header line: which job (pid, rank, script, host) on the left, the clock, step,
phase and state on the right, fitted to the header's own width whenever it changes."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

# What gives way in a narrow header, first to last, each part whole (never a cut word): the
# host, the script's first argument, the clock, the pid; then the state's end (a long break
# condition, which the Break panel says whole) is cut. The rank and the script's name stay.
GIVES_WAY = ("host", "argument", "clock", "pid")


def _script(argv: list[str]) -> tuple[str, str]:
    """The script's name (`-m pkg.train` for a module) and its first argument, if any."""
    if len(argv) < 2:
        return "?", ""
    if argv[1] == "-m" and len(argv) > 2:
        return f"-m {argv[2]}", ""
    return argv[1].rsplit("/", 1)[-1], (argv[2].rsplit("/", 1)[-1] if len(argv) > 2 else "")


def _ended(status: dict[str, Any]) -> bool:
    return str(status.get("state", "")).startswith("exited")


def _state(status: dict[str, Any], connection: str) -> Text:
    # After the end the phase is "ended", which the connection's words say ("job ended, exit code 130").
    phase = "" if _ended(status) else f"{status.get('phase', '?')} · "
    right = Text(f"step {status.get('step', '?')} · {phase}")
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
    name stays whole: the parts in GIVES_WAY are left out, in that order, until the line fits."""
    name, argument = _script(session.get("argv") or [])
    rank = f" rank {session['rank']}/{session['world_size']}" if session.get("rank") is not None else ""
    clock = f"{int(elapsed // 3600):02d}:{int(elapsed % 3600 // 60):02d}:{int(elapsed % 60):02d} · "
    right = _state(status, connection)
    # After the end no clock: it would count on from a job that is gone (and it took the host's room).
    shown = set(GIVES_WAY) - ({"clock"} if _ended(status) else set())

    def left_words() -> str:
        # The pid first: it is what `stepdbg attach` and `kill` need.
        pid = f"pid {session.get('pid')}" if "pid" in shown else ""
        words = f"{pid}{rank}".strip()
        script = f"{name} {argument}" if argument and "argument" in shown else name
        host = f" @ {session.get('host')}" if "host" in shown and session.get("host") else ""
        return f"{words}  {script}{host}" if words else f"{script}{host}"

    def length() -> int:
        return len(left_words()) + 1 + len(clock if "clock" in shown else "") + right.cell_len

    for part in GIVES_WAY:
        if width is None or length() <= width:
            break
        shown.discard(part)
    left = Text(left_words(), style="bold")
    if "clock" in shown:
        right = Text(clock) + right
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
