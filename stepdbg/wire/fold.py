"""stepdbg's own lines at a terminal, folded between words at its width (issue 45, the ninth
walk's 6): the terminal's own wrap broke them inside a word at the 80th column (`the model's
inpu` / `t is already`, a number as `1.234` over `56789`). Each line is folded where the
stream is a terminal, its later lines indented two columns more than the first; a word
longer than a line stays whole (the terminal wraps it). Only stepdbg's own lines: the job's
are the job's, as it wrote them.

Used where stepdbg writes its lines to a terminal: the job's agent (Bus.say: the --no-tui
console's breaks and changes), the line console (commands.out), the prompt-toolkit REPL
(tui/repl.Folded), the TUI launcher's relay of the job's stderr once the TUI closes (a
message's later lines too: OwnLines) and `stepdbg replay`'s lines at a terminal."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from typing import Any

# A line of stepdbg's own among a job's stderr lines: `stepdbg: ...`, a rank's `stepdbg[rank 0]: ...`.
OWN = re.compile(r"stepdbg(\[rank \d+\])?: ")


def fold(line: str, width: int, lead: int = 0) -> str:
    """`line` as lines of at most `width` columns, broken between words only, each later one
    indented as the first and two columns more (a list of numbers breaks after a comma).
    `lead`: the columns of a writer's prefix before the line's own text (torchrun's
    `[default1]:`), which later lines are indented under."""
    if len(line) <= width:
        return line
    text = line[lead:]
    indent = " " * lead + text[:len(text) - len(text.lstrip())]
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_long_words=False,
                                   break_on_hyphens=False)) or line


def columns(stream: Any) -> int | None:
    """The width of the terminal `stream` writes to; None where it is not one (a pipe, a
    file, a script's own stream object)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns if stream.isatty() else None
    except (AttributeError, OSError, ValueError):  # (no fileno, closed, not a real file)
        return None


def for_terminal(text: str, stream: Any, lead: int = 0) -> str:
    """`text` as stepdbg writes it to `stream`: each line folded at the terminal's width
    where `stream` is a terminal, else as it is (`lead` as fold's)."""
    width = columns(stream)
    return text if not width else "\n".join(fold(line, width, lead) for line in text.split("\n"))


def say(text: str, stream: Any = None, flush: bool = True) -> None:
    """Write one of stepdbg's own messages to `stream` (stderr), folded at a terminal: the
    command line's errors and notices (a bad spec, a missing bundle, a runtime dir that is
    not there) were cut mid-word at 80 columns."""
    stream = sys.stderr if stream is None else stream
    if stream is not None:  # (one write: print writes the text and its newline apart, and a signal's
        stream.write(for_terminal(text, stream) + "\n")  # handler between the two left the next message
        if flush:  # on the same line: `...--timeout 3600 s)stepdbg diff: stopped by SIGINT`, the suite's red)
            stream.flush()


class OwnLines:
    """Which of a job's relayed stderr lines are stepdbg's own: a `stepdbg: ...` line and
    the indented lines after it from the same writer (the same message's later lines: a
    break's `  at train.py:27  loss = ...`, a replay's `  domain: ...`), the lines of each
    writer (a torchrun rank) followed apart. A blank or unindented line ends a message."""

    def __init__(self) -> None:
        self.within: dict[str, bool] = {}  # writer -> its last line was stepdbg's

    def own(self, writer: str, text: str) -> bool:
        mine = OWN.match(text) is not None or (self.within.get(writer, False) and text[:1] in (" ", "\t")
                                               and bool(text.strip()))
        self.within[writer] = mine
        return mine
