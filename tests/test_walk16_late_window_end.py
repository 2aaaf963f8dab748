"""A window attached after the job's last break says that break at the end (issue 45, the
closing walk's leftover): the Break panel of a TUI that attached once the break was over said
only `the job ended (exit code 0)`, since the break's event went out before it came. The end
now carries the job's record of its last break and the changes made from its step on. A real
served job: a first client sees its break and continues it; the TUI (Pilot, 80x24) attaches
while it runs on, and the job ends."""

from __future__ import annotations

from conftest import WAIT, run_past, wait_for
from test_tui_fixes import real
from tui_walk import screen_text

from stepdbg import client
from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp


@real
async def test_a_window_attached_after_the_last_break_says_it_at_the_end(start_job):
    start_job("--break", "nan", script_args=("--nan-at", "2", "--sleep", "0.1", "--steps", "25")).info()
    with client.connect() as first:  # the window that saw the break
        brk = first.wait_paused(WAIT)
        assert brk is not None and brk["condition"] == "nan", brk
        first.set_lr(0.005)  # (a change made at the break: not what was done about it, not said as such)
        first.cont()
        run_past(first, 5)  # (the break is over when the late window comes)
        first.close(then="stay")
    late = await AsyncClient.connect()
    app = StepdbgApp(late)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
            await wait_for(pilot, lambda: "the last break" in " ".join(screen_text(app).split()),
                           "the Break panel's last break")
            shown = " ".join(screen_text(app).split())
            assert "the last break: step 2 (" in shown and "[nan]" in shown and "train_loop.py:" in shown, shown
            assert "then:" not in shown, shown  # (an LR set is no rewind nor skip)
            app.exit(None)
    finally:
        await late.close()


@real
def test_info_status_says_the_last_break_in_words_while_the_job_runs(start_job):
    """The status's `last_break` (a window attached late reads it) was a dump at the console's
    `info status`: `last_break  step=2, phase=..., details=…, replay=…`. It is the break in the
    console's words, as `paused` is."""
    from stepdbg.client.info_text import info_lines

    start_job("--break", "nan", script_args=("--nan-at", "2", "--sleep", "0.1", "--steps", "60")).info()
    with client.connect() as c:
        assert c.wait_paused(WAIT) is not None
        c.cont()
        run_past(c, 4)  # (the break is over when the late window comes)
        lines = info_lines(c, "status")
        said = next((ln for ln in lines if ln.startswith("last_break")), "")
        assert "at step 2 (before_backward) [nan]: loss is nan" in said and "details=" not in said, lines
        c.close(then="end")
