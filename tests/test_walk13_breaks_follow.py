"""The Breaks panel shown follows another client's breakpoint changes (issue 45, the closing
walk of 2026-11-27's 1: with 7 open, `break off nan` and `break add loss>100` at an
`attach --repl` left the table saying `● nan` and no loss>100 until one left the panel; the
Log had the changes). A real job under Pilot; failed before its fix."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from test_walk10_tui_fields import at_break
from textual.widgets import DataTable

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


def rows(table: DataTable) -> list[tuple[str, str]]:
    return [(str(table.get_row_at(i)[0]), str(table.get_row_at(i)[1])) for i in range(table.row_count)]


@real
async def test_the_breaks_panel_shows_another_clients_changes(tui_at_break):
    from stepdbg.client.async_client import AsyncClient

    async with tui_at_break("--break", "nan", script=NAN, size=(80, 24)) as (app, pilot):
        await at_break(app, pilot)
        await pilot.press("escape", "7")
        table = app.query_one("#breaks-table", DataTable)
        await wait_for(pilot, lambda: ("●", "nan") in rows(table), "the breakpoints")
        other = await AsyncClient.connect()  # the console of `stepdbg attach --repl`
        try:
            await other.enable_break("nan", False)
            await other.add_break("loss>100")
            await wait_for(pilot, lambda: ("○", "nan") in rows(table) and ("●", "loss>100") in rows(table),
                           f"the other client's changes in the table: {rows(table)}")
        finally:
            await other.close()
