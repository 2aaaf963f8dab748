"""A table's header over its columns (CI's red of 2026-11-27: the Optim panel showed
`group  lr  pinned  params` over ` AdamW[0]  0.01  -  4` for four minutes). Textual's
DataTable caches each rendered cell under a count that `add_row` moves, but fits its
columns later, when idle, without moving it: a repaint between the two (a busy machine's
timing) keeps the header at the widths of before the rows, until something else moves
the count (a resize). Here the repaint is made to come in between: `render_line` of the
header right after the rows, as the compositor would. Every table of the TUI is a
RowTable."""

from __future__ import annotations

from textual.app import App, ComposeResult

from stepdbg_tui.table_in_scroll import RowTable


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield RowTable(id="t")

    def on_mount(self) -> None:
        self.query_one(RowTable).add_columns("group", "lr", "pinned", "params")


async def test_the_header_stands_over_wider_rows_added_after_it_was_painted():
    app = OneTable()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        t = app.query_one(RowTable)
        t.add_row("A[0]", "1", "-", "4")  # (a row of narrower cells: the table's height stays)
        await pilot.pause()
        t.clear()
        t.add_row("AdamW[0]", "0.01", "-", "4")
        t.render_line(0)  # a repaint before the table fits its columns (it does when idle)
        await pilot.pause()
        await pilot.pause()
        head, row = (t.render_line(y).text for y in (0, 1))
        assert [head.find(w) for w in ("group", "lr", "pinned", "params")] == \
               [row.find(w) for w in ("AdamW[0]", "0.01", "-", "4")], (head, row)


async def test_the_header_stands_over_a_cell_updated_wider_after_it_was_painted():
    app = OneTable()
    async with app.run_test(size=(80, 24)) as pilot:
        t = app.query_one(RowTable)
        t.add_row("A[0]", "1", "-", "4", key="g")
        await pilot.pause()
        t.update_cell("g", t.ordered_columns[0].key, "AdamW[0]", update_width=True)
        t.render_line(0)
        await pilot.pause()
        await pilot.pause()
        head, row = (t.render_line(y).text for y in (0, 1))
        assert head.find("lr") == row.find("1"), (head, row)
