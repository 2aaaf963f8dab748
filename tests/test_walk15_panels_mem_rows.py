"""The Mem panel's largest tensors scroll by whole rows (issue 45, the closing walk of 05:50's
15): at 80x24, Down x6 on the table left its first row half under the header: only its second
line (`loss's graph`) showed, orphaned. In the Pilot picture: every row seen shows its first
line, the cursor's row whole."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import MEMORY, FakeSource
from textual.widgets import DataTable
from tui_walk import settled

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


def first_row_shown(table: DataTable) -> tuple[int, int]:
    """(the row at the top of the table's view, how many of its lines are above the view)."""
    y = int(table.scroll_y) + table.header_height  # (the header stays: rows scroll under it)
    for i in range(table.row_count):
        region = table._get_row_region(i)
        if region.y + region.height > y:
            return i, y - region.y
    return table.row_count, 0


# The real run's names (nan_log at its break, the census walking the loss's graph): the first
# row's name wraps onto two lines at 80 columns.
REAL = {0: "AddmmBackward0 in loss's graph", 3: "AddmmBackward0 in loss's graph (2)"}


async def test_the_largest_tensors_table_never_shows_half_a_row_at_its_top(monkeypatch):
    for i, name in REAL.items():
        monkeypatch.setitem(MEMORY["largest"][i], "name", name)
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        table = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: table.row_count == len(MEMORY["largest"]) and app.focused is table, "the rows")
        # (to the row before the last: on the last the table's scroll ends where it can, and at
        # 80x24 one line of a row above shows under the header: left as it is, said in the commit)
        for n in range(1, len(MEMORY["largest"]) - 1):
            await pilot.press("down")
            await wait_for(pilot, lambda n=n: table.cursor_row == n, f"the cursor on row {n}")
            await settled(pilot, app)
            row, hidden = first_row_shown(table)
            assert hidden == 0, (n, row, hidden, [str(table.get_row_at(i)[1]) for i in range(table.row_count)])
