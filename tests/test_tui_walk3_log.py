"""The Log panel as the third newcomer's walk at 80x24 met it (issue 45, the walk's items 11,
15, 16, 17 and 27), the TUI under Pilot attached to a real job of its own (conftest's
tui_at_break); each failed before its fix."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import DEMOS, FIXTURE, WAIT, Tmux, wait_for
from test_tui_fixes import real
from test_tui_walk2_log import log_words
from tui_walk import screen_text

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp


@real
@pytest.mark.parametrize("keys", [("end", "9"), ("down", "9")], ids=["end", "down"])
async def test_the_log_shows_its_lines_after_keys_pressed_before_it_opened(start_job, keys):
    """`stepdbg attach` to a job paused at its break, End (or Down) on the Break panel, then
    9: the Log opened blank, and stayed so (its RichLog never learnt its width: Textual sent
    it no Resize after a scroll in the frame before, and its lines waited for one). Now it
    shows them."""
    start_job("--break", "nan", script=DEMOS / "nan_log.py").info()
    first = await AsyncClient.connect()
    brk = await first.wait_paused(WAIT)
    await first.close(then="stay")
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            await pilot.press(*keys)
            await wait_for(pilot, lambda: f"paused at step {brk['step']}" in screen_text(app), f"the Log after {keys}")
            assert f"break at step {brk['step']} [nan]" in screen_text(app), screen_text(app)
            app.exit(None)
    finally:
        await client.close(then="end")


@real
async def test_a_change_that_changes_nothing_is_not_logged_and_a_skip_is(tui_at_break):
    """`break add nan` (set already) logged `breakpoint added: nan` as if it changed
    something; a second k (the step skipped already) was a toast only. Now the Log has the
    changes that happened, and says the skip both times; a refusal names the breakpoints
    in words (it said `set: ['nan']`)."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        await pilot.press("e", *"break add nan", "enter")
        await pilot.press(*"break add grad_norm>1e9", "enter")
        await pilot.press(*"break rm xyz", "enter")
        await wait_for(pilot, lambda: "no breakpoint 'xyz'" in str(app.query_one("#repl-out").content),
                       "the refusal under the line")
        refusal = str(app.query_one("#repl-out").content)
        assert "(the breakpoints are: nan, grad_norm>1e9)" in refusal and "[" not in refusal, refusal
        await pilot.press("escape", "9", "k")
        await wait_for(pilot, lambda: "will be skipped" in log_words(app), "the skip in the Log")
        await pilot.press("k")
        await wait_for(pilot, lambda: log_words(app).count("will be skipped") == 2, "the second skip in the Log")
        said = log_words(app)
        assert f"change at step {step}: breakpoint added: grad_norm>1e9" in said, said
        assert "breakpoint added: nan" not in said, said
        assert f"step {step}'s update will be skipped (asked already)" in said, said


def toasts(app: StepdbgApp) -> str:
    return " | ".join(n.message for n in app._notifications)


def footer(app: StepdbgApp) -> str:
    """The footer's line: the screen's last (the toasts are above it)."""
    return [ln for ln in screen_text(app).splitlines() if ln.strip()][-1]


@real
async def test_after_the_end_the_keys_that_drive_the_job_leave_the_footer_and_say_why(tui_at_break):
    """c to the end of nan_log: the footer still offered `c cont n phase s step r replay l
    LR k skip b breaks`, and p said `Connection lost`. Now the footer keeps q and ?, and p
    (or c, k) says that the job has ended and what still works."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py", script_args=("--steps", "32")) as (
            app, pilot):
        await wait_for(pilot, lambda: "c cont" in footer(app) and "k skip" in footer(app), "the footer")
        await pilot.press("c")
        await wait_for(pilot, lambda: "job ended" in screen_text(app).splitlines()[0], "the job's end")
        await wait_for(pilot, lambda: "c cont" not in footer(app) and "q quit" in footer(app),
                       "the footer without the job's keys")
        for gone in ("c cont", "n phase", "s step", "r replay", "l LR", "k skip", "b breaks"):
            assert gone not in footer(app), footer(app)
        assert "q quit" in footer(app), footer(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: any("nothing to" in str(n.message) for n in app._notifications), "p's words")
        said = " ".join(str(n.message) for n in app._notifications)  # (pressed on a panel: its toast)
        assert "the job has ended (exit code 0): nothing to pause" in said and "q quits" in said, said
        assert "onnection lost" not in said, said


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@real
def test_a_finding_is_in_the_log_once_where_the_jobs_output_is_too(tmp_path, private_runtime_dir):
    """`stepdbg --break 'expr: 1/((step-3)*(step-5)) > 100' python train_loop.py` in a
    terminal (160x48): the job's own output reaches the Log, and the finding that the
    expression raised was there twice, as the finding and as the job's stderr line
    (`stepdbg: finding [breakpoint_raised] ...`). Now once."""
    raises = "expr: 1/((step-3)*(step-5)) > 100"
    term = Tmux(tmp_path, private_runtime_dir, f"--break '{raises}' {sys.executable} {FIXTURE} --steps 8",
                size=(160, 48))
    try:
        term.wait_screen("job ended, exit code 0")
        term.keys("9")
        screen = term.wait_screen("the job ended with exit code 0")
        assert "finished" in screen, screen  # (the job's output is in the Log)
        assert screen.count("finding [breakpoint_raised]") == 1, screen
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
