"""After `kill -9`, the header says the job is gone at 80 columns (issue 45, the walk of
08:30's 3): paused at `before_optimizer_step`, its words `connection lost: job (pid N) gone`
did not fit, and the header said `connection lost` (their part before the reason) on, after
Ctrl+R too, while the REPL line and the toast said the job was gone; and its clock counted on. A real served job
(conftest's tui_at_break), Pilot at 80x24."""

from __future__ import annotations

import os
import re
import signal

from conftest import wait_for
from test_tui_fixes import real
from tui_walk import screen_text, settled


@real
async def test_the_header_says_gone_after_kill_9_at_a_long_phase(tui_at_break):
    async with tui_at_break("--break", "grad_norm>0", script_args=("--steps", "40")) as (app, pilot):
        assert app.status["phase"] == "before_optimizer_step", app.status
        pid = app.source.session["pid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(pilot, lambda: app.gone is not None, "the job known gone")
        await settled(pilot, app)
        await wait_for(pilot, lambda: "gone" in screen_text(app, skip=()).splitlines()[0],
                       f"the header's 'gone': {screen_text(app, skip=()).splitlines()[0]}")
        await pilot.press("ctrl+r")
        await settled(pilot, app)
        top = screen_text(app, skip=()).splitlines()[0]
        assert "step 0 · before_optimizer_step · " in top and top.rstrip().endswith("gone"), top
        assert not re.search(r"\ds · step", top), top  # (no clock counting on from a job that is gone)
