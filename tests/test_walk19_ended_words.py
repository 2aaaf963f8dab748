"""Issue 45's eighteenth newcomer walk, its leftovers: what the TUI says after the job's end
(a real job under Pilot at 80x24, looked at where the person looks: the screen drawn).

1. The Breaks panel (7): a spec typed in its add box after the end was sent to the job, and
   its refusal (`[Errno 32] Broken pipe`) said under the box; the box now says the job has
   ended and nothing is added, and sends nothing.
2. The Optim panel (4), never opened before the end: an empty table under its note, and the
   hint `l: set the LR of the selected group` on; the hint says the LR takes no change now.
4. The Break panel after `k` (skip) and the end said `step 2's update will be skipped`: it says
   what the step's record has, `was skipped`."""

from __future__ import annotations

import pytest
from conftest import wait_for
from textual.widgets import Input, Label
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)


def shown(app) -> str:
    return " ".join(screen_text(app, skip=()).split())


async def to_the_end(app, pilot) -> None:
    await pilot.press("c")
    await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
    await settled(pilot, app)


async def test_a_spec_typed_in_the_breaks_box_after_the_end_is_not_sent_and_the_box_says_so(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "5")) as (app, pilot):
        sent: list[str] = []
        add = app.source.add_break
        app.source.add_break = lambda spec: (sent.append(spec), add(spec))[1]
        await to_the_end(app, pilot)
        await pilot.press("7")
        await settled(pilot, app)
        await pilot.press("tab")
        await settled(pilot, app)
        assert app.focused is app.query_one("#break-input", Input), app.focused
        await pilot.press(*"nan", "enter")
        await settled(pilot, app)
        assert sent == [], sent
        words = shown(app)
        assert "the job has ended: no spec typed here is added" in words, words
        assert "Broken pipe" not in words and "nothing to show" not in words, words  # (its rows are shown)
        assert "step==2" in words, words


async def test_the_optim_panel_after_the_end_says_its_lr_takes_no_change(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "5")) as (app, pilot):
        await to_the_end(app, pilot)
        await pilot.press("4")
        await settled(pilot, app)
        words = shown(app)
        assert "l: set the LR" not in words, words
        assert "the job has ended: its LR takes no change now (q quits)" in words, words
        assert "this panel was not shown while it ran, so it has nothing to show" in words, words
        assert "group lr pinned params" not in words, words  # (an empty table's header said nothing)


async def test_the_optim_panel_seen_before_the_end_keeps_its_groups_and_drops_the_l_hint(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "5")) as (app, pilot):
        await pilot.press("4")
        await wait_for(pilot, lambda: "SGD[0]" in shown(app), "the optimizer's group")
        assert "l: set the LR of the selected group" in shown(app), shown(app)
        await to_the_end(app, pilot)
        words = shown(app)
        assert "SGD[0]" in words and "l: set the LR" not in words, words
        assert str(app.query_one("#opt-hint", Label).render()).startswith("the job has ended"), words


async def test_a_skip_is_said_in_the_past_after_the_end(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "5")) as (app, pilot):
        await pilot.press("k")
        await wait_for(pilot, lambda: "step 2's update will be skipped" in shown(app), "the skip at the pause")
        await to_the_end(app, pilot)
        await pilot.press("1")
        await settled(pilot, app)
        words = shown(app)
        assert "then: change at step 2: step 2's update was skipped" in words, words
        assert "will be skipped" not in words, words


async def test_after_a_kill_the_breaks_box_and_the_optim_hint_say_the_job_is_gone(tui_at_break):
    import os
    import signal

    async with tui_at_break("--break", "step==2", script_args=("--steps", "5")) as (app, pilot):
        sent: list[str] = []
        add = app.source.add_break
        app.source.add_break = lambda spec: (sent.append(spec), add(spec))[1]
        pid = app.source.session["pid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: app.gone is not None, "the job seen gone")
        await pilot.press("7")
        await settled(pilot, app)
        await pilot.press("tab", *"nan", "enter")
        await settled(pilot, app)
        assert sent == [], sent
        words = shown(app)
        assert f"the job (pid {pid}) is gone: no spec typed here is added" in words, words
        assert "keys act on the job here" not in words, words
        await pilot.press("escape", "4")
        await settled(pilot, app)
        words = shown(app)
        assert f"the job (pid {pid}) is gone: its LR takes no change now" in words and "l: set" not in words, words
