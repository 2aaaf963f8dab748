"""stepdbg's own lines at a terminal, folded between words at its width (issue 45, the ninth
walk's 6): the terminal's own wrap broke them inside a word at the 80th column (`the model's
inpu` / `t is already`, a number as `1.234` over `56789`). Each line is folded where the
stream is a terminal, its later lines indented two columns more than the first; a word
longer than a line stays whole (the terminal wraps it). Only stepdbg's own lines: the job's
are the job's, as it wrote them.

Used where stepdbg writes its lines to a terminal: the job's agent (Bus.say: the --no-tui
console's breaks and changes), the line console (commands.out), the prompt-toolkit REPL
(tui/repl.Folded) and the TUI launcher's relay of the job's stderr once the TUI closes."""

from __future__ import annotations

import os
import re
import textwrap
from typing import Any

# A line of stepdbg's own among a job's stderr lines: `stepdbg: ...`, a rank's `stepdbg[rank 0]: ...`.
OWN = re.compile(r"stepdbg(\[rank \d+\])?: ")


def fold(line: str, width: int) -> str:
    """`line` as lines of at most `width` columns, broken between words only, each later one
    indented as the first and two columns more (a list of numbers breaks after a comma)."""
    if len(line) <= width:
        return line
    indent = line[:len(line) - len(line.lstrip())]
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_long_words=False,
                                   break_on_hyphens=False)) or line


def columns(stream: Any) -> int | None:
    """The width of the terminal `stream` writes to; None where it is not one (a pipe, a
    file, a script's own stream object)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (AttributeError, OSError, ValueError):  # (no fileno, closed, not a real file)
        return None


def for_terminal(text: str, stream: Any) -> str:
    """`text` as stepdbg writes it to `stream`: each line folded at the terminal's width
    where `stream` is a terminal, else as it is."""
    width = columns(stream)
    return text if not width else "\n".join(fold(line, width) for line in text.split("\n"))
