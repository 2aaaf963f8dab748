"""The LR dialog's pin box says on and off by its glyph too (issue 45, the closing walk's
16): its words differed, its glyph (`▐X▌`) was the same both ways, only its colour not."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.dialogs import PIN_WORDS, LrScreen, PinBox

pytestmark = pytest.mark.timeout(60)


def box_row(app: StepdbgApp, on: bool) -> str:
    return next((r for r in screen_text(app).splitlines() if PIN_WORDS[on] in r), "")


async def test_the_pin_boxs_glyph_differs_on_and_off():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LrScreen), "the LR dialog")
        await pilot.press("tab")
        await wait_for(pilot, lambda: isinstance(app.focused, PinBox), "the pin box's focus")
        await wait_for(pilot, lambda: box_row(app, True), "the box on")
        on = box_row(app, True)
        await pilot.press("space")
        await wait_for(pilot, lambda: box_row(app, False), "the box off")
        off = box_row(app, False)
    glyph_on, glyph_off = on[:on.index(PIN_WORDS[True])].strip(" █"), off[:off.index(PIN_WORDS[False])].strip(" █")
    assert "X" in glyph_on and "X" not in glyph_off, (on, off)
