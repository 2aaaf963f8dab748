"""Issue 45's nineteenth newcomer walk, 1: the Breaks panel (7) after its last breakpoint is
deleted. The focus went to nothing; Tab put it on the empty table, which showed no focus
(the footer still `c cont n phase`), and the `n` typed next stepped the job; a second Tab
reached the add box. Now the focus stays on the table, its header drawn in the focus's
tint, and Tab goes to the add box at once. A real job under Pilot at 80x24."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)


def header_background(table: DataTable) -> set[str]:
    """The colours the table's header row is drawn on."""
    return {str(seg.style.bgcolor) for seg in table.render_line(0) if seg.style and seg.text.strip()}


async def test_tab_from_the_emptied_breaks_table_goes_to_the_add_box(tui_at_break):
    async with tui_at_break("--break", "step==2") as (app, pilot):
        await pilot.press("7")
        await settled(pilot, app)
        table, box = app.query_one("#breaks-table", DataTable), app.query_one("#break-input", Input)
        assert table.row_count == 1, table.row_count
        await pilot.press("delete")
        await settled(pilot, app)
        assert table.row_count == 0
        assert app.focused is table, app.focused  # (nothing had it: the keys went to no widget seen)
        seen = header_background(table)
        where = (app.status.get("step"), app.status.get("phase"))
        await pilot.press("tab")
        await settled(pilot, app)
        assert app.focused is box, app.focused
        footer = " ".join(screen_text(app, skip=()).splitlines()[-1].split())
        assert "add it" in footer and "c cont" not in footer, footer
        assert header_background(table) != seen, seen  # the empty table's focus was drawn on its header
        await pilot.press("n")
        await settled(pilot, app)
        assert box.value == "n" and (app.status.get("step"), app.status.get("phase")) == where and app.status.get("state") == "paused", app.status
