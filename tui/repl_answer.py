"""What fits under the REPL line (app.py's #repl-out: 6 rows at most): the line typed, then
its answer's last rows as the screen wraps them. The rows are counted after wrapping (the
closing walk's 1: four lines chosen before it, a traceback's frame wrapped onto three rows
at 80 columns, and its error, the last line, was pushed out of sight).

Where rows went, the whole answer is in the Log (9), and the cut says so (the twentieth
walk's 2: `list(range(200))` showed `…` and its last rows; the rest was nowhere)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

ROWS = 6  # the answer area's max-height (app.py's CSS)
RUNNING = "running… (ctrl+c interrupts)"  # under a line whose code runs in the job, until its answer
CUT = "… (the whole answer: the Log, 9)"  # where rows went: they are in the Log
LOG_LINES = 500  # at most, of one answer in the Log (a print of a million lines is not copied whole)


def wrapped(text: str, width: int) -> list[str]:
    """`text`'s rows at `width` columns, words wrapped, a word longer than a row folded."""
    console = Console(width=max(width, 1), file=None, color_system=None, legacy_windows=False)
    return [row.plain.rstrip() for line in text.split("\n")
            for row in (Text(line).wrap(console, max(width, 1)) or [Text("")])]


def width_of(out: Any) -> int:
    """The columns `out` (the answer area) draws words in; before its first layout, the app's less its padding."""
    return out.content_region.width or max(1, out.app.size.width - 2)


def fitted(line: str, text: str, width: int, rows: int = ROWS, cut: str = "…") -> str:
    """`» line` and the last lines of `text` whose rows at `width` columns fit in `rows`, an
    ellipsis (`cut`) first where some went (the bottom is kept: a traceback's error is its last line).
    Lines are kept whole (the area wraps them); a last line taller than the room alone is cut
    to its last rows."""
    echo = f"» {line}"
    room = max(2, rows - len(wrapped(echo, width)))
    lines = text.rstrip().split("\n") if text.strip() else []
    tall = [len(wrapped(ln, width)) for ln in lines]
    if sum(tall) <= room:
        return "\n".join([echo, *lines])
    kept: list[str] = []
    left = room - 1  # (the ellipsis' row)
    for ln, n in zip(reversed(lines), reversed(tall), strict=True):
        if n > left:
            break
        kept.insert(0, ln)
        left -= n
    return "\n".join([echo, cut, *(kept or wrapped(lines[-1], width)[-left:])])


def answer(app: Any, out: Any, line: str, text: str) -> None:
    """`text`, the answer to `line`, under the line (`out`); where it is cut there, the whole
    of it in the Log too (LOG_LINES at most), under `» line`, as the Log keeps lines."""
    shown = fitted(line, text, width_of(out), cut=CUT)
    out.update(shown)
    if shown.split("\n")[1:2] != [CUT]:
        return
    lines = text.rstrip().split("\n")
    app.log_line(f"» {line}")
    for ln in lines[:LOG_LINES]:
        app.log_line(ln)
    if len(lines) > LOG_LINES:
        app.log_line(f"… ({len(lines) - LOG_LINES} more lines of this answer not kept here)", "dim")
