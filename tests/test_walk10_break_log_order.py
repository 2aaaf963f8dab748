"""The Log says a Ctrl-C at a pause in event order (issue 45, the tenth walk's 3):
`--break step==50`, Ctrl-C then i, then 9 showed the job's KeyboardInterrupt traceback,
then `resumed at step 50 (before_forward)`, then the end; the resume came first (the
KeyboardInterrupt ends the pause, and the job sends `resumed`, before the traceback is
printed). A launched job's lines come by its pipes, its events by the socket: which first
is chance. The orders real runs meet by chance, made certain: the app gets the job's lines
and events (socket order kept, pipe order kept) in seeded interleavings, and the Log (9) as
drawn is read."""

from __future__ import annotations

import random

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from test_walk9_ranks_log_order import _merged, out
from tui_walk import screen_text

from stepdbg.wire.change_text import change_said
from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.messages import JobEvent

pytestmark = pytest.mark.timeout(120)

CHANGE = {"what": "interrupt", "step": 30, "by": "a front end (the TUI's i)", "signal": "SIGINT"}
TRACE = ["Traceback (most recent call last):", '  File "demos/nan_log.py", line 52, in main', "KeyboardInterrupt"]


@pytest.mark.parametrize("seed", [None, 45, 10, 3, 7])
async def test_a_ctrl_c_at_a_pause_is_said_before_its_traceback_and_after_the_resume(seed):
    socket = [JobEvent("change", CHANGE), JobEvent("resumed", {"step": 30})]
    pipe = [out("stderr", f"stepdbg: change: {change_said(CHANGE)}"), *(out("stderr", t) for t in TRACE)]
    # None: the walk's order (the traceback by the pipe before the resume by the socket)
    messages = [socket[0], *pipe, socket[1]] if seed is None else _merged(random.Random(seed), socket, pipe)
    src = FakeSource(paused=True)  # (paused at step 30: a launched job, its output in the Log)
    src.torchrun = object()
    app = StepdbgApp(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("9")
        for message in messages:
            app.post_message(message)
        await wait_for(pilot, lambda: "resumed at step 30" in screen_text(app) and "KeyboardInterrupt" in screen_text(app),
                       "the resume and the traceback")
        app.post_message(JobEvent("exited", {"exit_code": 130, "steps": 30, "in_step": True}))
        await wait_for(pilot, lambda: "the job ended with exit code 130" in screen_text(app), "the end")
        rows = [r.strip(" ▊▎") for r in screen_text(app).splitlines()]
    at = {what: next(i for i, r in enumerate(rows) if r.startswith(what))
          for what in ("change at step 30: Ctrl-C", "resumed at step 30", "Traceback (most recent", "the job ended")}
    assert list(at.values()) == sorted(at.values()), "\n".join(rows)
