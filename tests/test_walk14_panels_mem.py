"""Back on the Mem panel its table's cursor row is in view (issue 45, the closing walk's 5):
at 80x24, the cursor moved down the largest tensors, 1 then 5: the panel was at its top and
the cursor's row below the view, and Enter opened a row never shown."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import MEMORY, FakeSource
from textual.widgets import DataTable
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


async def test_the_mem_tables_cursor_row_shows_when_the_panel_is_shown_again():
    src = FakeSource(paused=True)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("5")
        table = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: table.row_count == len(MEMORY["largest"]) and app.focused is table, "the rows")
        await pilot.press(*["down"] * 8)
        await wait_for(pilot, lambda: table.cursor_row == 8, "the cursor on the ninth row")
        last = "graph (2)"  # (the end of its name, `MseLossBackward0 in loss's graph (2)`, on its own line)
        assert MEMORY["largest"][8]["name"].endswith(last)
        await wait_for(pilot, lambda: last in screen_text(app), "the row in view")
        await pilot.press("1")
        await wait_for(pilot, lambda: app.active_panel() == "break", "the Break panel")
        await pilot.press("5")
        await wait_for(pilot, lambda: app.focused is table, "the table's focus")
        await wait_for(pilot, lambda: [c[0] for c in src.calls].count("memory") == 2, "the panel's second answer")
        # laid out: its rows, then the scroll after that refresh (two pauses were not always enough: the full
        # suite's run beside a walk and a helper read the screen before the scroll)
        await wait_for(pilot, lambda: last in screen_text(app), "the cursor's row in view again")
        assert table.cursor_row == 8
