"""The header of a torchrun job's rank keeps the job and its state apart (issue 45, the ninth
walk's 5): at 80 columns, ddp_nan.py's rank 0 paused for rank 1's break read `ddp_nan.py
@vm step 6` (and at other widths `ddp_nan.py 26s · step 6`, a clock read as an argument):
one blank column between the script's part and the state's, where the rank and the script
have two. The header as drawn (the screen's first row), at each width from 64 (the state whole) to 110."""

from __future__ import annotations

import re

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(120)

# The state's part: the clock in any of its spellings (or none), then the step.
STATE = re.compile(r"(\d\d:\d\d:\d\d · |\d+m\d\ds · |\d+s · )?step 6 · ")


async def test_the_script_and_the_state_are_two_columns_apart_at_every_width():
    src = FakeSource(paused=True)
    src.session = {**src.session, "pid": 3767, "host": "vm", "argv": ["python", "demos/ddp_nan.py"],
                   "rank": 0, "world_size": 2, "started": 1000.0}
    src.paused = {**(src.paused or {}), "condition": "rank 1", "phase": "before_optimizer_step", "step": 6,
                  "reason": "paused for rank 1's break at step 6: loss is nan"}
    src.status_at_attach = {**src.status_at_attach, "step": 6, "phase": "before_optimizer_step",
                            "paused": src.paused}
    app = StepdbgApp(src, clock=lambda: 1026.0)
    bad = []
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "PAUSED" in screen_text(app).splitlines()[0], "the header at the pause")
        for width in range(64, 111):
            await pilot.resize_terminal(width, 24)
            await wait_for(pilot, lambda w=width: app.size[0] == w, f"the screen at {width} columns")
            await pilot.pause()
            line = screen_text(app).splitlines()[0].rstrip()
            state = STATE.search(line)
            assert state and "rank 0/2  ddp_nan.py" in line, (width, line)
            if not line[:state.start()].endswith("  "):
                bad.append(f"{width}: {line!r}")
    assert not bad, "\n".join(bad)
