"""The quit and Ctrl-C dialogs paint their default button as the default (issue 45, the
closing walk of 05:50's 14): `c: continue it` was painted primary blue while Enter (the
focus) was on `l: leave it paused`, which only its reverse text told. In the Pilot picture
at 80x24: the button Enter presses has the primary colour, no other has it."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from rich.color import Color
from textual.widgets import Button
from tui_walk import settled

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.dialogs import CtrlCScreen, QuitScreen

pytestmark = pytest.mark.timeout(60)


def painted(app: StepdbgApp, button: Button) -> Color | None:
    """The background the terminal shows at the middle of `button`'s label row."""
    region = button.region
    return app.screen.get_style_at(region.x + region.width // 2, region.y + region.height // 2).bgcolor


async def check(app: StepdbgApp, pilot, key: str, screen: type, default: str) -> None:
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, screen), f"the {screen.__name__}")
    await settled(pilot, app)
    buttons = [b for b in app.screen.query(Button) if b.display]
    assert app.focused is app.screen.query_one(f"#{default}", Button)  # (Enter presses it)
    colours = {b.id: painted(app, b) for b in buttons}
    assert [i for i, c in colours.items() if blue(c)] == [default], colours


def blue(c: Color | None) -> bool:
    """The theme's primary blue (under the dialog's tint), not a grey button nor the red `end`."""
    return c is not None and c.triplet is not None and c.triplet.blue - c.triplet.red > 40


async def test_the_button_enter_presses_is_the_one_painted_primary():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await settled(pilot, app)
        await check(app, pilot, "q", QuitScreen, "stay")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, QuitScreen), "the dialog closed")
        await check(app, pilot, "ctrl+c", CtrlCScreen, "cancel")
