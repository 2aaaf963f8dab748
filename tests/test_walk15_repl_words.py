"""The REPL line's `pause` and the words of c, R and the LR dialog after the closing walk of
issue 45 (its 10 and 20): the TUI under Pilot at 80x24 attached to a real job, toasts on,
the drawn screen and the toasts read."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from textual.widgets import Input, Label
from tui_walk import screen_text, settled

RUNS_ON = ("--sleep", "0.2", "--steps", "100000")  # (a job that runs until ended)


def toasts(app) -> list[str]:
    return [str(n.message) for n in app.raised]


def one_line(text: str) -> str:
    return " ".join(text.split())


@real
async def test_pause_typed_on_the_repl_line_pauses_a_running_job(tui_at_break):
    """The closing walk's 10: while the job ran the line's placeholder said `Python needs a
    pause (p)`, and `pause` typed there answered `eval: the job is running; pause it first`."""
    async with tui_at_break("--break", "step==1", script_args=RUNS_ON, notifications=True) as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.get("state") == "running", "the job running")
        await pilot.press("e", *"pause", "enter")
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause `pause` asked")
        await settled(pilot, app)
        drawn = one_line(screen_text(app, skip=()))
        assert "pause it first" not in drawn and "eval:" not in drawn, drawn


@real
async def test_the_break_s_answers_coming_after_c_say_no_refusal(tui_at_break):
    """CI's run of the test above: `c` went while the break's answers were on their way, and the
    last of them (the frame's names, for Tab) came back `names: the job is running; pause it
    first` under the REPL line. The break's answers are asked here once the job runs again."""
    async with tui_at_break("--break", "step==1", script_args=RUNS_ON, notifications=True) as (app, pilot):
        await app.source.cont()
        await wait_for(pilot, lambda: app.status.get("state") == "running", "the job running")
        await app._refresh_break()
        await settled(pilot, app)
        drawn = one_line(screen_text(app, skip=()))
        assert "pause it first" not in drawn and not any("names" in t for t in toasts(app)), (drawn, toasts(app))


@real
async def test_c_and_r_while_running_and_the_lr_dialog_say_plain_words(tui_at_break):
    """The closing walk's 20: c while running said `the job is not paused`; R said `rewind:
    rewind needs a paused job`; an empty LR field `'' is not a learning rate`; the LR's toast
    `lr: every update from now uses it ...` named neither the new LR nor the old."""
    async with tui_at_break("--break", "step==1", script_args=RUNS_ON, notifications=True) as (app, pilot):
        await pilot.press("l")
        await wait_for(pilot, lambda: app.screen.query("#lr-value"), "the LR dialog")
        await pilot.press("enter")
        await settled(pilot, app)
        assert "type a learning rate" in str(app.screen.query_one("#lr-error", Label).content)
        app.screen.query_one("#lr-value", Input).value = "0.002"
        await pilot.press("enter")
        await wait_for(pilot, lambda: [t for t in toasts(app) if "uses it" in t], "the LR's toast")
        said = next(t for t in toasts(app) if "uses it" in t)
        assert " -> 0.002: " in said and said.startswith("lr "), said
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.get("state") == "running", "the job running")
        app.raised.clear()
        await pilot.press("c")
        await settled(pilot, app)
        assert "the job is running already" in one_line(screen_text(app, skip=())), screen_text(app, skip=())
        await pilot.press("R")
        await wait_for(pilot, lambda: [t for t in toasts(app) if "rewind" in t], "R's answer")
        assert "rewind needs a paused job" in toasts(app) and not [t for t in toasts(app) if "rewind: rewind" in t], \
            toasts(app)


def test_the_tui_doc_says_what_the_repl_line_s_tab_completes():
    """The closing walk's 25: docs/tui.md said Tab completes commands and frame names only; it
    completes an attribute after a dot too (bd1c890, a29875a), on the line and at the prompt."""
    docs = " ".join((Path(__file__).resolve().parent.parent / "docs" / "tui.md").read_text().split())
    assert "after a dot, the attributes of the object before it" in docs  # stepdbg attach --repl
    assert "and after a dot (`opt.param_g`) an attribute of the object before it" in docs  # the REPL line
    assert "`pause` while the job runs" in docs
