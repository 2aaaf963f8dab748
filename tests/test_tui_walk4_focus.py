"""Keys typed in a field stay there (issue 45's invariant (a), the fourth newcomer's walk,
items 1 and 2), the TUI under Pilot attached to a real job of its own (conftest's
tui_at_break); each failed before its fix."""

from __future__ import annotations

from conftest import wait_for
from test_tui_fixes import real
from textual.widgets import Input
from tui_walk import header_text


@real
async def test_a_break_that_comes_while_a_spec_is_typed_leaves_the_typing_in_its_field(tui_at_break):
    """The walk's 1: typing in the Breaks add box while the job ran, a break came: it moved
    the focus to the Break panel, and the rest of the typing ran as keys (n stepped the job,
    l opened the LR dialog)."""
    async with tui_at_break("--break", "step==0", "--break", "step==3", script_args=("--sleep", "1")) as (app, pilot):
        await pilot.press("b")  # (the add box has the focus, then the job runs on to step 3, a second a step)
        app.action_cont()
        await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status.get("step") == 3,
                       "the break at step 3")
        phase = app.status.get("phase")
        await pilot.press("n", "l")
        box = app.query_one("#break-input", Input)
        assert app.focused is box and box.value == "nl", (app.focused, box.value)
        assert app.screen is app.screen_stack[0] and app.status.get("phase") == phase, header_text(app)


@real
async def test_a_repl_line_that_opens_a_panel_keeps_the_focus_on_the_line(tui_at_break):
    """The walk's 2: `info mem` on the REPL line opened the Memory panel and gave it the
    focus, so the next line typed ran as keys (n stepped the job)."""
    async with tui_at_break("--break", "step==0") as (app, pilot):
        phase = app.status.get("phase")
        await pilot.press("e", *"info mem", "enter")
        await wait_for(pilot, lambda: app.query_one("TabbedContent").active == "memory", "the Memory panel")
        await pilot.press("n")
        line = app.query_one("#repl", Input)
        assert app.focused is line and line.value == "n", (app.focused, line.value)
        assert app.status.get("phase") == phase, header_text(app)


def test_a_scalar_in_the_tensor_panel_is_said_with_its_article():
    """The walk's 14: `step is a int, not a tensor`."""
    from stepdbg_tui.tensor_panel import render_summary

    said = render_summary({"name": "step", "type": "int", "repr": "3"}).plain
    assert said == "step is an int, not a tensor: 3", said
    assert render_summary({"name": "lr", "type": "float", "repr": "0.1"}).plain.startswith("lr is a float")
