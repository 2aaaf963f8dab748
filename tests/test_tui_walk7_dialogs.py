"""The sixth newcomer walk's dialogs and fields (issue 45): what a pause, a job running or the
job's end does to the field or the dialog that has the focus. The TUI under Pilot attached
to a real job of its own (conftest's tui_at_break), moved by a second client where the job
must move while a dialog or a field has the keys; a real terminal (tmux) for the console's
last line. Each failed before its fix."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import Tmux, wait_for
from test_tui_fixes import real
from textual.widgets import Input
from tui_walk import screen_text, settled

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.dialogs import CtrlCScreen, QuitScreen


def words(app) -> str:
    return " ".join(screen_text(app, skip=()).split())


@real
async def test_a_break_while_the_add_box_has_the_focus_is_said_under_it_and_c_stays_typing(tui_at_break):
    """The sixth walk's 5: 7 (the add box has the focus) while the job runs, a break, then
    `c q c`: the box held `cqc` and said only `bad condition 'cqc'`; the header alone said the
    pause (a toast, if seen, went). The typing stays in the box (issue 45's (a)), and under
    it, while the job is paused: the pause, and that escape then c continues it."""
    async with tui_at_break("--break", "step==3", "--break", "step==6", script_args=("--steps", "40")) as (app, pilot):
        await pilot.press("b")
        await settled(pilot, app)
        assert app.focused is app.query_one("#break-input", Input)
        other = await AsyncClient.connect()
        try:
            await other.cont()
            await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status.get("step") == 6,
                           "the break at step 6")
            await pilot.press(*"cqc")
            await settled(pilot, app)
            assert app.query_one("#break-input", Input).value == "cqc"
            shown = words(app)
            assert "bad condition 'cqc'" in shown, shown
            assert "the job paused at step 6 [step==6]: reached step 6 · escape, then c continues" in shown, shown
            assert (await other.status())["step"] == 6 and app.status.get("state") == "paused"
            await pilot.press("escape", "c")
            await wait_for(pilot, lambda: app.status.get("state") != "paused", "c to continue the job")
            await settled(pilot, app)
            assert "escape, then c continues" not in words(app), words(app)
        finally:
            await other.close(then="continue")


@real
@pytest.mark.parametrize("key", ["q", "ctrl+c"])
async def test_a_quit_or_ctrl_c_dialog_open_at_the_job_s_end_closes(tui_at_break, key):
    """The sixth walk's 3: q (or ctrl+c) before a short job ended, then its end: under `job
    ended, exit code 0` the dialog still offered to continue it, leave it paused, end it, or
    `i: interrupt the job` (which then did nothing). At the end the dialog closes; the Break
    panel says the end, and q closes the window."""
    async with tui_at_break("--break", "step==3", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press(key)
        await settled(pilot, app)
        assert isinstance(app.screen, QuitScreen if key == "q" else CtrlCScreen), app.screen
        other = await AsyncClient.connect()
        try:
            await other.cont()
            await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the job's end")
            await settled(pilot, app)
            shown = words(app)
            assert len(app.screen_stack) == 1, app.screen_stack
            assert "leave it" not in shown and "interrupt the job" not in shown, shown
            assert "q closes this window" in shown, shown
        finally:
            await other.close()


@real
async def test_the_quit_dialog_of_a_job_running_says_l_leaves_it_running_and_so_does_the_console(tmp_path,
                                                                                                private_runtime_dir):
    """The sixth walk's 2: q, then l (`leave it paused`) while the job ran: the console said
    `the job stays paused without the TUI`, and the job ran on. The dialog says what l does
    to a job running (leave it running), and the console says the job goes on."""
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    term = Tmux(tmp_path, private_runtime_dir,
                f"{sys.executable} tests/fixtures/train_loop.py --steps 100000 --sleep 0.05", size=(80, 24))
    try:
        term.wait_screen("RUNNING")
        term.keys("q")
        term.wait_screen("l: leave it running")
        term.keys("l")
        screen = term.wait_screen("without the TUI")
        assert "stepdbg: the job goes on without the TUI" in " ".join(screen.split()), screen
        assert "stays paused" not in screen, screen
    finally:
        term.close()
