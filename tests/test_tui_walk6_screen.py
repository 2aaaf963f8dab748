"""The screen at 80x24 after the fifth newcomer walk (issue 45's invariant (e): no word cut
at the edge, nothing covered): the tab bar, the header at a pause asked for, the toasts.
The TUI under Pilot attached to a real job of its own (conftest's tui_at_break); each
failed before its fix."""

from __future__ import annotations

import contextlib
from typing import Any

from conftest import wait_for
from test_tui_fixes import real
from textual.widgets import Input, Tabs
from tui_walk import screen_text, settled

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp

PAUSING = "pausing at the next pause point"


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


@real
async def test_at_80x24_the_tab_bar_stays_whole_and_the_header_keeps_the_host_at_a_pause_asked_for(tui_at_break):
    """The fifth walk's 12: on panels 5 to 9 the tab bar scrolled a column (its tabs took 81
    of 80: the first tab's first letter cut); at a pause asked for (n) the header said
    `PAUSED [pause]` and had no room left for the host (`@ vm`)."""
    async with tui_at_break("--break", "step==1", size=(80, 24)) as (app, pilot):
        tabs = app.query_one(Tabs)
        for key in "56789":
            await pilot.press("escape", key)
            await settled(pilot, app)
            bar = screen_text(app, skip=()).splitlines()[1]
            scrolled = tabs.query_one("#tabs-scroll").scroll_x  # (the tabs' row, scrolled to the tab shown)
            assert scrolled == 0 and bar.lstrip().startswith("1 Break"), (key, scrolled, bar)
            assert bar.rstrip().endswith("9 Log"), (key, bar)
        await pilot.press("escape", "1", "n")
        await wait_for(pilot, lambda: app.status.get("phase") != "before_forward", "the next phase")
        await settled(pilot, app)
        line = screen_text(app, skip=()).splitlines()[0]
        host = app.source.session.get("host") or ""
        assert line.rstrip().endswith("PAUSED") and "[pause]" not in line, line
        if len(host) <= 8:  # (a machine's own name: a long one has no room at 80 columns)
            assert f"train_loop.py @ {host} " in line, line


@contextlib.asynccontextmanager
async def with_toasts(start_job: Any, *args: str, script_args: tuple[str, ...]) -> Any:
    """conftest's tui_at_break at 80x24, its toasts drawn (Pilot draws none unless asked)."""
    start_job(*args, script_args=script_args).info()
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    try:
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the first pause")
            yield app, pilot
            app.exit(None)
    finally:
        await client.close(then="end")


@real
async def test_p_says_pausing_until_the_pause_and_toasts_leave_the_tensor_fields_in_sight(start_job,
                                                                                         private_runtime_dir):
    """The fifth walk's 13 and 12. p's toast `pausing at the next pause point…` stayed after
    the job paused (and at a pause, p toasted it too, of a job paused already); at 80x24 the
    toasts piled up over the Tensor panel's slice field."""
    # (a job that runs until ended: of 20 steps of 0.2 s, it could end before a busy machine's p came)
    async with with_toasts(start_job, "--break", "step==1", script_args=("--sleep", "0.2", "--steps", "100000")) as (
            app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.get("state") == "running", "the job running")
        await pilot.press("p")
        await settled(pilot, app)
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
        await settled(pilot, app)
        assert not [t for t in toasts(app) if t.startswith(PAUSING)], toasts(app)
        await pilot.press("p")
        await settled(pilot, app)
        assert not [t for t in toasts(app) if t.startswith(PAUSING)], toasts(app)
        assert "the job is paused already" in " ".join(screen_text(app, skip=()).split())
        await pilot.press("3", "escape", *"tttt")  # four toasts (t in a job of one process)
        await settled(pilot, app)
        field = app.query_one("#tensor-index", Input).region
        shown = screen_text(app, skip=())
        rows = [line[field.x:field.right] for line in shown.splitlines()[field.y:field.bottom]]
        assert len(toasts(app)) >= 1 and "slice, e.g. 0, :8" in rows[1], (rows, toasts(app), shown)
        assert all(r.startswith("▊") and r.endswith("▎") for r in rows), (rows, shown)  # (its frame whole)
