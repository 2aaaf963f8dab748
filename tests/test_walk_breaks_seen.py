"""What a TUI knows of the job's breaks (issue 45, a newcomer's walk of 08:30). A second
break in the same step (`nan` re-armed at step 2's break before the backward: it broke
again before the update, [nan]) was missing from the Log, and at the end the Break panel
said the first as `the last break`: the TUI keyed a break of the job by its step and rank
alone. A real served job (conftest's tui_at_break), 80x24."""

from __future__ import annotations

from typing import Any

from conftest import WAIT, run_past, text_of, wait_for
from test_tui_fixes import real
from textual.widgets import RichLog
from tui_walk import screen_text, settled

from stepdbg import client
from stepdbg.client.async_client import AsyncClient


def log_text(app: Any) -> str:
    """The Log panel's lines as drawn (once it is shown), as words."""
    return " ".join(" ".join(str(line.text) for line in app.query_one("LogPanel RichLog", RichLog).lines).split())


def words(app: Any) -> str:
    return " ".join(screen_text(app, skip=()).split())


@real
async def test_a_second_break_in_the_same_step_is_in_the_log_and_is_the_last_break(tui_at_break):
    async with tui_at_break("--break", "nan", script_args=("--nan-at", "2", "--steps", "6")) as (app, pilot):
        assert (app.status["step"], app.status["phase"]) == (2, "before_backward"), app.status
        other = await AsyncClient.connect()
        try:
            await other.remove_break("nan")  # (re-armed: `nan` broke once in this step)
            await other.add_break("nan")
            await other.cont()
            await wait_for(pilot, lambda: app.status.get("phase") == "before_optimizer_step"
                           and app.status.get("state") == "paused", "the second break of step 2")
        finally:
            await other.close(then="stay")
        app.action_panel("log")
        await settled(pilot, app)
        await wait_for(pilot, lambda: log_text(app).count("break at step 2 [nan]") == 2,
                       f"both breaks of step 2 in the Log: {log_text(app)}")
        await pilot.press("escape", "c")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        app.action_panel("break")
        await wait_for(pilot, lambda: "the last break" in words(app), "the Break panel's last break")
        assert "the last break: step 2 (before_optimizer_step) [nan]" in words(app), words(app)


async def _late_window() -> tuple[Any, Any]:
    from stepdbg_tui.app import StepdbgApp

    late = await AsyncClient.connect()
    return late, StepdbgApp(late)


@real
async def test_a_window_attached_after_a_break_and_its_replay_says_both_while_the_job_runs(start_job,
                                                                                         private_runtime_dir):
    """A first client saw the break at step 2, replayed it and continued; a TUI attached while
    the job runs on said `running — no break yet` and its Log nothing (the walk of 08:30's 2)."""
    start_job("--break", "nan", script_args=("--nan-at", "2", "--sleep", "0.05", "--steps", "2000")).info()
    with client.connect() as first:
        assert first.wait_paused(WAIT)["condition"] == "nan"
        first.replay()
        first.cont()
        run_past(first, 5)  # (the break is over when the late window comes)
        first.close(then="stay")
    late, app = await _late_window()
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "running", "the running job's status")
            app.action_panel("break")
            await wait_for(pilot, lambda: "The last break: step 2 · before_backward · [nan]" in words(app),
                           f"the last break: {words(app)}")
            app.action_panel("log")
            await wait_for(pilot, lambda: "replay of step 2" in log_text(app), f"the replay in the Log: {log_text(app)}")
            assert "break at step 2 [nan]" in log_text(app), log_text(app)
            app.exit(None)
    finally:
        await late.close(then="end")


@real
async def test_a_window_attached_after_another_clients_replay_at_the_pause_shows_it(start_job,
                                                                                 private_runtime_dir):
    """Case B: another client replayed the step at this pause; a TUI attached then showed no
    sign of it (the Break panel asked `press r to replay`)."""
    start_job("--break", "nan", script_args=("--nan-at", "2", "--steps", "6")).info()
    with client.connect() as first:
        assert first.wait_paused(WAIT)["condition"] == "nan"
        summary = first.replay()["summary"]
        first.close(then="stay")
    late, app = await _late_window()
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
            await settled(pilot, app)
            record = " ".join(text_of(app, "#break-record").split())
            assert summary[:40] in record and "press r to replay" not in record, record
            app.action_panel("log")
            await wait_for(pilot, lambda: "replay of step 2" in log_text(app), f"the replay in the Log: {log_text(app)}")
            app.exit(None)
    finally:
        await late.close(then="end")
