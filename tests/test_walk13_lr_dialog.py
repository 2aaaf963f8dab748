"""The LR dialog's pin box (issue 45, the twelfth walk's 8): `l`, `0.1`, Tab to the pin box,
Enter flipped the box and the dialog stayed open, where the footer offers Enter as `set`;
and the box looked the same on and off but for its colour. Enter sets the LR from the box;
space turns the pin on and off, and its words say which."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.dialogs import LrScreen, PinBox

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("keys, pinned", [((), True), (("space",), False), (("space", "space"), True)])
async def test_enter_on_the_pin_box_sets_the_lr_and_space_turns_the_pin(keys, pinned):
    src = FakeSource(paused=True)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LrScreen), "the LR dialog")
        await pilot.press(*"0.1", "tab")
        await wait_for(pilot, lambda: isinstance(app.focused, PinBox), "the pin box's focus")
        await pilot.press(*keys)
        box = app.screen.query_one(PinBox)
        words = str(box.label)
        assert words == ("pinned: kept before every step" if pinned else "not pinned: a scheduler may change it"), words
        await pilot.press("enter")
        await wait_for(pilot, lambda: any(c[0] == "set_lr" for c in src.calls), "the LR set")
        assert ("set_lr", (0.1, None, pinned)) in src.calls, src.calls
        assert not isinstance(app.screen, LrScreen)
