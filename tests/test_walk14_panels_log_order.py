"""The Log says a resume before what the job printed after it (issue 45, the closing walk's
21): shape_error, c at its uncaught exception's break: the Log showed the traceback, then
`resumed`. The job sends `resumed` before it goes on (and prints), but a launched job's
lines come by its pipes and its events by the socket, either first. The app gets them in
the walk's order (the pipe first) and the other, and the Log (9) as drawn is read."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from test_walk9_ranks_log_order import out
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.messages import JobEvent

pytestmark = pytest.mark.timeout(120)

BREAK = {"step": 0, "phase": "exception", "condition": "exception",
         "reason": "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x64 and 128x10)",
         "details": {"exception": "RuntimeError"}, "scalars": {}}
TRACE = ["Traceback (most recent call last):", '  File "demos/shape_error.py", line 32, in forward',
         "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x64 and 128x10)"]


@pytest.mark.parametrize("pipe_first", [True, False])
async def test_c_at_an_exceptions_break_says_resumed_before_the_traceback(pipe_first):
    src = FakeSource(paused=True)
    src.paused = {**src.paused, **BREAK}
    src.torchrun = object()  # (a launched job: its output comes by the pipes, into the Log)
    app = StepdbgApp(src)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("9")
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
        await pilot.press("c")
        await wait_for(pilot, lambda: ("cont", ()) in src.calls, "the resume asked")
        pipe, socket = [out("stderr", t) for t in TRACE], [JobEvent("resumed", {"step": 0})]
        for message in (pipe + socket if pipe_first else socket + pipe):
            app.post_message(message)
        await wait_for(pilot, lambda: "resumed at step 0" in screen_text(app) and "RuntimeError: mat1" in screen_text(app),
                       "the resume and the traceback")
        rows = [r.strip(" ▊▎") for r in screen_text(app).splitlines()]
    at = {what: next(i for i, r in enumerate(rows) if r.startswith(what))
          for what in ("resumed at step 0", "Traceback (most recent", "RuntimeError: mat1")}
    assert list(at.values()) == sorted(at.values()), "\n".join(rows)
