"""A table that fits its view: its long cells wrap onto more lines of their row in one
column that gives way, and where even so it would not fit, whole columns are left out in
a stated order and the panel says which (the Memory panel's largest tensors were cut at
`dtype s`, the Ranks panel's note at `this rank broke:`, a DDP model's table was 81
columns in 80)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable


def focus_mark(selector: str) -> str:
    """CSS: `selector` tinted in the accent colour, its scrollbar too, while it has the focus, so
    the person sees where the keys go (issue 45: the Break panel's focus had no mark). A
    colour, not a character: the text keeps its columns, and a sentence read off the screen
    stays whole. A tint a 256-colour terminal keeps (tmux's xterm-256color): the grey of 8%
    was colour 234 over 233, a Tab stop that showed nowhere (the fifth walk's 4)."""
    return (f"{selector}:focus {{ background: $accent 20%; scrollbar-color: $accent; "
            "scrollbar-color-hover: $accent; }")


NARROWEST = 16  # the column that gives way keeps at least this many


def room_of(t: DataTable, view: Widget) -> int:
    """The columns `t`'s cells may take in `view` (the panel holding it: its scrollbar and
    the table's may come), after the cells' padding is taken; 0 before the first layout."""
    scrolls = view.styles.overflow_y in ("auto", "scroll")  # (a Vertical panel never shows a scrollbar)
    bars = view.styles.scrollbar_size_vertical * scrolls + t.styles.scrollbar_size_vertical
    return max(0, view.size.width - bars)


def fill_fitted(t: DataTable, view: Widget, labels: Sequence[str], rows: Sequence[Sequence[Text]],
                keys: Sequence[str], flexible: int, drop: Sequence[int] = (), narrowest: int = NARROWEST) -> list[str]:
    """Clear `t` and fill it with `rows` (their `keys`) under `labels`, as wide as `view`
    allows: column `flexible` wraps (at spaces, dots and brackets: never inside a word; a
    piece longer than the column ends in an ellipsis), down to `narrowest`;
    below that, the columns in `drop` are left out, first to last, until it fits. Returns
    the labels of the columns left out, for the panel to say."""
    widths = [max([len(label), *(row[i].cell_len for row in rows)]) for i, label in enumerate(labels)]
    room = room_of(t, view)
    kept = list(range(len(labels)))
    if room:
        for i in drop:
            if sum(widths[k] + 2 * t.cell_padding for k in kept if k != flexible) + 2 * t.cell_padding + \
                    min(widths[flexible], narrowest) <= room:
                break
            kept.remove(i)
    others = sum(widths[k] + 2 * t.cell_padding for k in kept if k != flexible)
    narrow = max(min(widths[flexible], narrowest), room - others - 2 * t.cell_padding) if room else None
    row = t.cursor_row  # (filled again, the cursor stays)
    t.clear(columns=True)
    for i in kept:
        t.add_column(labels[i], width=narrow if i == flexible and narrow and narrow < widths[i] else None)
    for cells, key in zip(rows, keys, strict=True):
        for cell in cells:
            cell.overflow = "fold"  # (a cell wraps at its spaces)
        if narrow and flexible in kept:
            cells = [*cells[:flexible], wrapped(cells[flexible], narrow), *cells[flexible + 1:]]
        t.add_row(*[cells[i] for i in kept], key=key, height=None)
    if 0 < row < t.row_count:
        t.move_cursor(row=row, animate=False)
    return [labels[i] for i in range(len(labels)) if i not in kept]


BREAK_AFTER = re.compile(r"[.,/\[\]]+")  # where a word longer than its column may go on to its next line


def wrapped(cell: Text, width: int) -> Text:
    """`cell` in lines of at most `width`, broken after a space, and a word longer than the
    width after a dot, a comma, a slash or a bracket, never inside a name's part: the Memory
    panel's 'opt.state[head.0.wei' / 'ght].exp_avg_sq' at 80 columns. A piece with no such
    place within the width ends in '…'."""
    if all(len(word) <= width for word in cell.plain.split()):
        return cell  # (the table wraps it at its spaces)
    plain, ends = cell.plain, []
    for word in re.finditer(r"\S+\s*", plain):
        if len(word.group().rstrip()) > width:
            ends += [word.start() + m.end() for m in BREAK_AFTER.finditer(word.group().rstrip())]
        ends.append(word.end())
    lines: list[Text] = []
    start = 0
    while start < len(plain):
        end = len(plain) if len(plain) - start <= width else max(
            (e for e in ends if start < e <= start + width), default=0)
        if end:
            lines.append(cell[start:end])
            start = end
        else:  # no place to break within the width: the piece is cut, and an ellipsis says so
            lines.append(cell[start:start + width - 1] + Text("…"))
            start = next((e for e in ends if e > start), len(plain))
    for line in lines:
        line.rstrip()  # (in place: a space it broke after)
    return Text("\n", style=cell.style).join(lines)  # (the row's style, as the cell had it)


def left_out(labels: Sequence[str]) -> str:
    """The words that say which columns a narrow terminal left out."""
    return f" · left out at this width: {', '.join(labels)}" if labels else ""
