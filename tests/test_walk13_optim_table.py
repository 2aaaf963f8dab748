"""The Optim panel after an LR change from another client (issue 45, the twelfth walk's 3): an
attached TUI showed `AdamW[0]  0.1  -  4` after `lr 0.002` at the console, the LR of when
the panel was opened (its table asked the job only when shown; the change event reached
the Break panel alone). It asks again when the job's status says an LR set at the pause.
The walk also saw its header over other widths once (`group  lr  pinned  params`); the
table is not refitted (its columns are as wide as their cells, no width given), and here,
after the change and a resize 80x24 -> 160x48 -> 80x24, each heading stands over its
column. A real job under Pilot; failed before its fix (the LR never came)."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from test_walk10_tui_fields import at_break
from textual.widgets import DataTable
from tui_walk import screen_text, settled

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


def lines(app) -> tuple[str, str]:
    """The table's header row and first row as on the screen."""
    rows = screen_text(app).splitlines()
    at = next((i for i, r in enumerate(rows) if "group" in r and "params" in r), None)
    return (rows[at], rows[at + 1]) if at is not None and at + 1 < len(rows) else ("", "")


def aligned(app, table: DataTable) -> bool:
    """Each heading starts where its column's cell in the first row does."""
    head, row = lines(app)
    at = 0
    for label, cell in zip(("group", "lr", "pinned", "params"), [str(c) for c in table.get_row_at(0)], strict=True):
        if head.find(label, at) < 0 or row.find(cell, at) != head.find(label, at):
            return False
        at = head.find(label, at) + 1
    return True


@real
async def test_the_optim_panel_shows_another_clients_lr_set_its_header_over_its_rows(tui_at_break):
    from stepdbg.client.async_client import AsyncClient

    async with tui_at_break("--break", "nan", script=NAN, size=(80, 24)) as (app, pilot):
        await at_break(app, pilot)
        await pilot.press("escape", "4")
        table = app.query_one("#opt-table", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, "the param groups")
        await settled(pilot, app)
        await wait_for(pilot, lambda: aligned(app, table), f"the heads over their columns: {lines(app)}")  # (laid out)
        other = await AsyncClient.connect()  # the console of `stepdbg attach`
        try:
            await other.set_lr(0.000123, pin=False)
            await wait_for(pilot, lambda: "0.000123" in lines(app)[1], f"the LR set, on screen: {lines(app)}")
        finally:
            await other.close()
        await settled(pilot, app)
        await wait_for(pilot, lambda: aligned(app, table), f"the heads over their columns: {lines(app)}")  # (laid out)
        for size in ((160, 48), (80, 24)):
            await pilot.resize_terminal(*size)
            await settled(pilot, app)
            await wait_for(pilot, lambda: aligned(app, table), f"the header over its rows at {size}: {lines(app)!r}")
