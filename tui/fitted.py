"""A table that fits its view: one column gives way and its long cells fold onto more
lines of their row, so that no column is out of sight at 80 columns (the Memory panel's
largest tensors were cut at `dtype s`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget
from textual.widgets import DataTable

NARROWEST = 16  # the column that gives way keeps at least this many


def fill_fitted(t: DataTable, view: Widget, labels: Sequence[str], rows: Sequence[Sequence[Text]],
                keys: Sequence[str], flexible: int) -> None:
    """Clear `t` and fill it with `rows` (their `keys`) under `labels`, as wide as `view`
    (the panel holding it: its scrollbar and the table's may come) allows."""
    widths = [max([len(label), *(row[i].cell_len for row in rows)]) for i, label in enumerate(labels)]
    bars = view.styles.scrollbar_size_vertical + t.styles.scrollbar_size_vertical
    room = view.size.width - bars - 2 * t.cell_padding * len(widths)
    narrow = max(NARROWEST, room - sum(widths) + widths[flexible]) if view.size.width else None
    row = t.cursor_row  # (filled again, the cursor stays)
    t.clear(columns=True)
    for i, label in enumerate(labels):
        t.add_column(label, width=narrow if i == flexible and narrow and narrow < widths[i] else None)
    for cells, key in zip(rows, keys, strict=True):
        for cell in cells:
            cell.overflow = "fold"
        t.add_row(*cells, key=key, height=None)
    if 0 < row < t.row_count:
        t.move_cursor(row=row, animate=False)
