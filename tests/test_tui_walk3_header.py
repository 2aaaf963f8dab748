"""The header as the third newcomer's walk met it (issue 45, the walk's items 10, 21 and 23),
the TUI under Pilot attached to a real job of its own (conftest's tui_at_break); each failed
before its fix."""

from __future__ import annotations

from conftest import DEMOS, wait_for
from test_tui_fixes import real
from test_tui_walk2_log import log_words
from tui_walk import header_text


@real
async def test_at_an_exception_in_the_forward_the_header_says_where(tui_at_break):
    """shape_error's Linear raises inside the model's forward: the header said `step 0 ·
    after_forward` (the status's phase: the forward's end hook runs on an exception too).
    Now it says where the job is: in head's forward (the condition says the exception)."""
    async with tui_at_break("--break", "exception", script=DEMOS / "shape_error.py") as (app, pilot):
        await wait_for(pilot, lambda: "PAUSED" in header_text(app), "the header at the pause")
        said = header_text(app)
        assert "step 0 · in head's forward · PAUSED [" in said, said
        assert "after_forward" not in said, said


@real
async def test_after_p_the_header_says_the_pause_is_on_its_way(tui_at_break):
    """Paused at step 0 of a job that then sleeps between steps; c, then p: the header said
    `RUNNING` (and the Break panel `no break yet`) until the pause came, as if p had done
    nothing. Now it says `PAUSING (p)` until then."""
    async with tui_at_break("--break", "step==0", script_args=("--steps", "3", "--sleep", "600")) as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: "RUNNING" in header_text(app), "the job running")
        await pilot.press("p")
        await wait_for(pilot, lambda: "PAUSING (p)" in header_text(app), "the header after p")
        assert "after step 0 · PAUSING (p)" in header_text(app), header_text(app)


@real
async def test_after_a_ctrl_c_between_steps_the_step_numbers_agree(tui_at_break):
    """Paused at step 0 of a job that then sleeps between steps (stuck: no pause point comes);
    c, then ctrl+c and i: the header and the plots said step 0, the Log `change at step 1:
    Ctrl-C ...` (the next step's number, never begun). Now the Log says `after step 0`."""
    async with tui_at_break("--break", "step==0", script_args=("--steps", "3", "--sleep", "600")) as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: "after step 0 · RUNNING" in header_text(app), "the job between steps")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: app.screen is not app.screen_stack[0], "the Ctrl-C dialog")
        await pilot.press("i")
        await wait_for(pilot, lambda: "job ended" in header_text(app), "the job's end")
        await pilot.press("9")
        await wait_for(pilot, lambda: "the job ended with exit code" in log_words(app), "the Log's end")
        said = log_words(app)
        assert "step 0 · job ended" in header_text(app), header_text(app)
        assert "change after step 0: Ctrl-C (SIGINT) sent to the job" in said, said
        assert "step 1" not in said, said
