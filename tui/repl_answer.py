"""What fits under the REPL line (app.py's #repl-out: 6 rows at most): the line typed, then
its answer's last rows as the screen wraps them. The rows are counted after wrapping (the
closing walk's 1: four lines chosen before it, a traceback's frame wrapped onto three rows
at 80 columns, and its error, the last line, was pushed out of sight)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

ROWS = 6  # the answer area's max-height (app.py's CSS)
RUNNING = "running… (ctrl+c interrupts)"  # under a line whose code runs in the job, until its answer


def wrapped(text: str, width: int) -> list[str]:
    """`text`'s rows at `width` columns, words wrapped, a word longer than a row folded."""
    console = Console(width=max(width, 1), file=None, color_system=None, legacy_windows=False)
    return [row.plain.rstrip() for line in text.split("\n")
            for row in (Text(line).wrap(console, max(width, 1)) or [Text("")])]


def width_of(out: Any) -> int:
    """The columns `out` (the answer area) draws words in; before its first layout, the app's less its padding."""
    return out.content_region.width or max(1, out.app.size.width - 2)


def fitted(line: str, text: str, width: int, rows: int = ROWS) -> str:
    """`» line` and the last rows of `text` that fit in `rows` rows of `width` columns, an
    ellipsis first where some went (the bottom is kept: a traceback's error is its last line)."""
    echo = wrapped(f"» {line}", width)[:rows - 1]
    answer = wrapped(text.rstrip(), width) if text.strip() else []
    room = rows - len(echo)
    if len(answer) > room:
        answer = ["…", *answer[len(answer) - (room - 1):]] if room > 1 else answer[-room:]
    return "\n".join(echo + answer)
