"""The focus after the fifth newcomer walk (issue 45's invariant (d): the focus is always
visible and takes keys). The TUI under Pilot attached to a real job of its own (conftest's
tui_at_break); each failed before its fix."""

from __future__ import annotations

from rich.color import ColorSystem
from test_tui_fixes import real
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Button, Input
from tui_walk import focus_is_visible, settled

from stepdbg_tui.dialogs import LrScreen, PinBox
from stepdbg_tui.fields import Field

Triplet = tuple[int, int, int]


def colours(w: Widget) -> set[Triplet]:
    """The colours `w` draws (text and background) as a 256-colour terminal shows them (tmux's
    xterm-256color: the walker's)."""
    out = set()
    for strip in w.render_lines(Region(0, 0, w.size.width, w.size.height)):
        for seg in strip:
            for c in (seg.style.color, seg.style.bgcolor) if seg.style else ():
                if c is not None and not c.is_default:
                    t = c.downgrade(ColorSystem.EIGHT_BIT).get_truecolor()
                    out.add((t.red, t.green, t.blue))
    return out


def seen_apart(focused: set[Triplet], blurred: set[Triplet]) -> bool:
    """Some colour drawn with the focus is far (40 in a channel) from every colour drawn without it."""
    return any(min((max(abs(a - b) for a, b in zip(c, d, strict=True)) for d in blurred), default=255) >= 40
               for c in focused)


@real
async def test_every_tab_stop_on_the_break_and_tensor_panels_is_drawn_as_focused(tui_at_break):
    """The fifth walk's 4: Tab stopped on the Break panel (1) and on the Tensor panel (3), after
    the REPL line, with nothing drawn to say so: their mark, a grey 8% lighter, was colour 234
    over 233 in a 256-colour terminal. Each stop is drawn apart from how it is drawn without
    the focus, and takes keys (it is on screen)."""
    async with tui_at_break("--break", "step==1", size=(80, 24)) as (app, pilot):
        for panel in ("1", "3"):
            await pilot.press("escape", panel)
            await settled(pilot, app)
            stops: list[tuple[Widget, set[Triplet]]] = []
            for _ in range(4):
                await pilot.press("tab")
                await settled(pilot, app)
                assert app.focused is not None and focus_is_visible(app), (panel, app.focused)
                stops.append((app.focused, colours(app.focused)))
            for w, drawn in stops:
                if app.focused is not w:
                    assert seen_apart(drawn, colours(w)), (panel, w, "drawn the same with the focus and without")


@real
async def test_the_lr_dialog_keeps_the_focus_and_escape_closes_it(tui_at_break):
    """The fifth walk's 2: the LR dialog left open with nothing in it focused, escape doing
    nothing. An answer that came while it was open (u's frame move, typed just before l) put
    the dialog's focus on the Break panel under it; and Tab in it went nowhere (its binding's
    action was the screen's, which has none). Now the focus stays in the dialog, Tab goes round
    its field, pin box and button, and escape closes it from each."""
    async with tui_at_break("--break", "step==1") as (app, pilot):
        app.action_frame(1)  # u, then l before the job's answer
        app.action_set_lr()
        await settled(pilot, app)
        assert isinstance(app.screen, LrScreen) and app.focused is app.screen.query_one(Input), app.focused
        went = []
        for _ in range(3):
            await pilot.press("tab")
            await settled(pilot, app)
            went.append(type(app.focused))
        assert went == [PinBox, Button, Field], went  # (its field a Field: keys in the order typed; PinBox a Checkbox)
        for tabs in range(3):
            if not isinstance(app.screen, LrScreen):
                await pilot.press("l")
                await settled(pilot, app)
            await pilot.press(*["tab"] * tabs, "escape")
            await settled(pilot, app)
            assert len(app.screen_stack) == 1 and focus_is_visible(app), (tabs, app.screen_stack, app.focused)
