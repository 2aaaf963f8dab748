"""Tab's words under the REPL line go with the line (issue 45, the sixteenth walk's 13): after
Tab then Escape, `Tab completes a name ...; escape leaves the line (keys act on the job again)`
stayed on screen until the panel changed, read as still true of keys that now acted on the
job. The TUI under Pilot at 80x24, the drawn screen read."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


async def test_escape_takes_tabs_words_away_with_the_line():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e", *"zzq", "tab")
        await wait_for(pilot, lambda: "escape leaves the line" in " ".join(screen_text(app, skip=()).split()), "Tab's words")
        await pilot.press("escape")
        await wait_for(pilot, lambda: getattr(app.focused, "id", None) != "repl", "the line left")
        await pilot.pause()
        shown = " ".join(screen_text(app, skip=()).split())
        assert "escape leaves the line" not in shown and "Tab completes" not in shown, shown
