"""The eleventh newcomer walk's 3 (issue 45), on `demos/nan_log.py` at its break, the TUI under
Pilot: after a resize 160x48 -> 80x24 the Memory panel's largest-tensors rows were refitted
(db13b68) but the header kept its old widths (`size  tensor  category ...` over rows under
the wrong headings) until the panel was left and shown again. Failed before its fix."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from test_walk10_tui_fields import at_break
from textual.widgets import DataTable
from tui_walk import settled

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


def aligned(table: DataTable) -> bool:
    """The header's `tensor` starts where the first row's tensor name does."""
    head, row = table.render_line(0).text, table.render_line(1).text
    name = str(table.get_row_at(0)[1]).split()[0]
    return "tensor" in head and name in row and head.index("tensor") == row.index(name)


@real
async def test_the_largest_tensors_header_reflows_with_its_rows_on_a_resize(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN, size=(160, 48)) as (app, pilot):
        await at_break(app, pilot)
        await pilot.press("escape", "5")
        table = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: table.row_count > 1, "the largest tensors")
        await settled(pilot, app)
        assert aligned(table), (table.render_line(0).text, table.render_line(1).text)
        await pilot.resize_terminal(80, 24)
        await settled(pilot, app)
        await wait_for(pilot, lambda: aligned(table),
                       f"the header over its rows: {table.render_line(0).text!r} / {table.render_line(1).text!r}")
