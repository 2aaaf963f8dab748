"""The --help texts laid out at the terminal's width: prose filled, and the indented tables
and examples (written 80 to 100 wide) folded between words, never inside one. At 80
columns `stepdbg --help`'s commands lines were 83 to 96 characters and the terminal broke
them where the column ended."""

from __future__ import annotations

import re
import textwrap

# A table's row: its indent, its first column, the gap (two spaces or more), the rest.
_ROW = re.compile(r"^(?P<indent> +)(?P<left>\S.*?)(?P<gap> {2,})(?P<right>\S.*)$")
_WIDE_LEFT = 0.4  # a first column wider than this share of the width puts the rest beneath it


def fill(text: str, width: int, indent: str = "") -> str:
    """`text`'s paragraphs (blank-line apart) in `width` columns: a paragraph of prose (no
    line indented) filled; an indented one (a table, examples) as written where it fits,
    else each long line folded (fold_block)."""
    out = []
    for para in text.split("\n\n"):
        lines = para.splitlines()
        if lines and not any(line.startswith((" ", "\t")) for line in lines):
            out.append(textwrap.fill(" ".join(lines), width, initial_indent=indent, subsequent_indent=indent))
        else:
            out.append("\n".join(fold_block(lines, width)))
    return "\n\n".join(out)


def fold_block(lines: list[str], width: int) -> list[str]:
    """Indented lines in `width` columns. A row longer than that (`  name  what it does`,
    `  stepdbg ...  # a comment`) is folded between words: its rest wraps under its second
    column, or, where the first column is wide, goes on the lines beneath it; a line that
    continues a row (indented to its second column) joins it first. A long command line
    without a second column wraps with a shell's ` \\` at each break, so it still pastes."""
    out: list[str] = []
    row: tuple[str, str] | None = None  # (the row's first column with its gap, its rest so far)
    for line in lines:
        m = _ROW.match(line)
        if row is not None and line.strip() and len(line) - len(line.lstrip()) == len(row[0]) and not m:
            row = (row[0], f"{row[1]} {line.strip()}")
            continue
        if row is not None:
            out.extend(_row(*row, width))
            row = None
        if m and len(line) > width:
            row = (m["indent"] + m["left"] + m["gap"], m["right"])
        elif m and len(m["indent"] + m["left"] + m["gap"]) < width * _WIDE_LEFT:
            row = (m["indent"] + m["left"] + m["gap"], m["right"])  # (its continuation lines may need folding)
        else:
            out.extend(_plain(line, width))
    if row is not None:
        out.extend(_row(*row, width))
    return out


def _row(left: str, right: str, width: int) -> list[str]:
    if len(left) + len(right) <= width:
        return [left + right]
    if len(left) < width * _WIDE_LEFT:  # (a comment's lines go on as comments)
        return _wrap(right, width, left, " " * len(left) + ("# " if right[0] == "#" else ""))
    indent = " " * (len(left) - len(left.lstrip())) + "    "
    return [*_plain(left.rstrip(), width), *_wrap(right, width, indent, indent + ("# " if right[0] == "#" else ""))]


def _plain(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    indent = line[:len(line) - len(line.lstrip())]
    if line.lstrip().startswith("stepdbg "):  # a command line: continued as a shell continues it
        parts = _wrap(line.strip(), width - 2, indent, indent + "    ")
        return [p + " \\" for p in parts[:-1]] + parts[-1:]
    return _wrap(line.strip(), width, indent, indent + "  ")


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False)
