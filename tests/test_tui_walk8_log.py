"""The Log's last lines stay readable under toasts at 80x24 (issue 45, the seventh walk's
item 7: nothing covered). Toasts stand at the top right, under the tabs (7a642c2: never over
the REPL line); a Log of a few lines had them there too, its newest line under a toast. The
Log's lines now sit at its bottom, over the REPL line, as a terminal's do. The TUI under
Pilot with a canned source, its toasts drawn; failed before its fix."""

from __future__ import annotations

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]
CHANGES = [{"what": "lr", "step": 30, "lr": 0.001, "pinned": True},
           {"what": "break_add", "step": 30, "spec": "expr:loss > 4 and step > 100 and grad_norm > 1e9"}]
LAST = "change at step 30: breakpoint added: expr:loss > 4 and step > 100 and grad_norm > 1e9"


@pytest.mark.parametrize("size", SIZES)
async def test_the_log_s_last_lines_are_not_under_the_toasts(size):
    """9 (the Log: the break's lines and two changes), then two toasts (t and o in a job of
    one process): the Log's last two lines are on screen whole, each on its row."""
    src = FakeSource(paused=True)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=size, notifications=True) as pilot:
        await pilot.pause()
        for change in CHANGES:
            src.push("change", change)
        await pilot.press("9")
        await wait_for(pilot, lambda: "1e9" in screen_text(app, skip=()), "the Log's last line")
        await pilot.press("t", "o")
        await wait_for(pilot, lambda: all(words in screen_text(app, skip=()) for words in
                                          ("t switches ranks", "o picks ranks")), "the two toasts drawn")
        shown = " ".join(screen_text(app, skip=()).split())
        for line in ("change at step 30: LR set to 0.001 and pinned", LAST):  # (wrapped: its words in order)
            assert line in shown, screen_text(app, skip=())
