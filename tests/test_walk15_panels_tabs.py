"""The tab underline follows a resize made while a dialog is open (issue 45, the closing walk
of 05:50's 17): 160x48 -> 80x24 with the quit dialog open left the underline one column off
the active tab (`━━━━━━━━╺`) until the next panel change: the tabs lost a column of padding
each (-narrow) under the dialog, and the underline kept the wide tabs' place. In the Pilot
picture: after the dialog closes, the underline's bright part lies under the active tab's label."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from textual.widgets import Tabs
from textual.widgets._tabs import Underline
from tui_walk import settled

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.dialogs import QuitScreen

pytestmark = pytest.mark.timeout(60)


async def test_the_underline_is_under_the_active_tab_after_a_resize_under_the_quit_dialog():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await settled(pilot, app)
        await pilot.press("7")
        await settled(pilot, app)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen), "the quit dialog")
        await pilot.resize_terminal(80, 24)
        await settled(pilot, app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, QuitScreen), "the dialog closed")
        await settled(pilot, app)
        tabs = app.query_one(Tabs)
        active = tabs.active_tab
        assert active is not None
        line = tabs.query_one(Underline)
        label = active.virtual_region.shrink(active.styles.gutter)  # (its words, its padding left out)
        assert (line.highlight_start, line.highlight_end) == label.column_span, (
            line.highlight_start, line.highlight_end, label)
