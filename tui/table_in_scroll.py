"""A table inside a panel that scrolls (the Memory panel's largest tensors, between the
lines above it and the plot below it). With the focus on the table, its keys reach every
line of the panel: the cursor's row is kept in the panel's view, and a key that would move
the cursor past the table's first or last row scrolls the panel instead (at 80x24 the
lines above the table were out of reach: Up, PageUp and Home stopped at its first row)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.containers import ScrollableContainer
from textual.geometry import Region
from textual.widgets import DataTable


class RowTable(DataTable):
    """A table of rows whose Home and End move the cursor to its first and last row (a
    DataTable's scroll it sideways only: End in the Breaks table left the cursor on the
    first row, so Delete removed that one, not the last)."""

    def _update_dimensions(self, new_rows: Any) -> None:
        """Textual fits the columns to new rows (and to cells updated) when idle, after
        `add_row` has moved the count its render caches are keyed by; a repaint in between (a
        busy machine's timing) kept the header at the widths of before the rows (`group  lr`
        over `AdamW[0]  0.01`, CI's red of 2026-11-27) until a resize. Widths changed: the
        count moves and all is drawn again."""
        self._redrawn_if_wider(super()._update_dimensions, new_rows)

    def _update_column_widths(self, updated_cells: Any) -> None:
        self._redrawn_if_wider(super()._update_column_widths, updated_cells)

    def _redrawn_if_wider(self, fit: Callable[[Any], None], what: Any) -> None:
        before = [c.get_render_width(self) for c in self.columns.values()]
        fit(what)
        if before != [c.get_render_width(self) for c in self.columns.values()]:
            self._update_count += 1
            self.refresh()

    def action_scroll_home(self) -> None:
        super().action_scroll_top()

    def action_scroll_end(self) -> None:
        super().action_scroll_bottom()


class TableInScroll(RowTable):
    def _panel(self) -> ScrollableContainer | None:
        return self.parent if isinstance(self.parent, ScrollableContainer) else None

    def whole_rows(self) -> None:
        """The table's own scroll starts at a row: a row of two lines (a name wrapped) was left
        half under the header, its second line (`loss's graph`) orphaned at the top (the closing
        walk of 05:50's 15). Past half a row, it goes to the next row's start, never past the
        cursor's row."""
        top = int(self.scroll_y) + self.header_height  # (the header stays: rows scroll under it)
        for i in range(self.row_count):
            row = self._get_row_region(i)
            if row.y + row.height > top:
                if row.y < top:
                    start = row.y + row.height if i < self.cursor_row else row.y
                    self.scroll_to(y=start - self.header_height, animate=False, immediate=True)
                return

    def cursor_in_view(self) -> None:
        """Scroll the panel so that the cursor's row (the header with the first) shows."""
        panel = self._panel()
        if panel is None or not self.row_count:
            return
        self.whole_rows()
        row = self._get_row_region(self.cursor_row)
        top = 0 if self.cursor_row == 0 else row.y - int(self.scroll_y)
        at = self.virtual_region.offset  # the table's place in the panel's scrolled content
        panel.scroll_to_region(
            Region(0, at.y + top, 1, row.y + row.height - int(self.scroll_y) - top),
            animate=False,
            force=True,
        )

    def _moved(self) -> None:
        self.call_after_refresh(self.cursor_in_view)

    def _past_edge(self, up: bool, scroll: str, move: Callable[[], None]) -> None:
        """A key that moves the cursor: past the table's first (last) row it scrolls the panel."""
        panel = self._panel()
        if panel is not None and (self.cursor_row <= 0 if up else self.cursor_row >= self.row_count - 1):
            getattr(panel, scroll)(animate=False)
            return
        move()
        self._moved()

    def action_cursor_up(self) -> None:
        self._past_edge(True, "scroll_up", super().action_cursor_up)

    def action_cursor_down(self) -> None:
        self._past_edge(False, "scroll_down", super().action_cursor_down)

    def action_page_up(self) -> None:
        self._past_edge(True, "scroll_page_up", super().action_page_up)

    def action_page_down(self) -> None:
        self._past_edge(False, "scroll_page_down", super().action_page_down)

    def action_scroll_home(self) -> None:  # Home (ctrl+home): the first row, and the panel's top
        super().action_scroll_top()
        if (panel := self._panel()) is not None:
            panel.scroll_home(animate=False)

    def action_scroll_end(self) -> None:  # End (ctrl+end): the last row, and the panel's end
        super().action_scroll_bottom()
        if (panel := self._panel()) is not None:
            panel.scroll_end(animate=False)

    action_scroll_top = action_scroll_home
    action_scroll_bottom = action_scroll_end
