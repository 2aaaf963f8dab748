"""The header after the twelfth newcomer walk's 2 (issue 45): it changed its shape between
runs and sizes. The clock read `00:00:08` in one run and `21s` in another (the narrow
spelling where the wide one did not fit); at 80 columns lr_explode's break read
`lr_explode.py @vm ... PAUSED`, its reason `[grad_norm>200]` left out while the host stayed.
Now the clock has one spelling, and the break's condition is among the last parts to give
way (tui/header.py: the host, the arguments, the condition's later words, the clock, the
pid, then the condition). The TUI under Pilot (a canned source), its screen's first row read
at 80x24 and again after a resize to 160x48; failed before its fix."""

from __future__ import annotations

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


def header(app: StepdbgApp) -> str:
    return screen_text(app).splitlines()[0].strip()


async def test_the_break_reason_stays_at_80_columns_and_the_clock_has_one_spelling():
    src = FakeSource(paused=True)
    src.session = {**src.session, "pid": 12345, "host": "vm", "argv": ["python", "demos/lr_explode.py"],
                   "started": 1000.0}
    src.paused = {**(src.paused or {}), "condition": "grad_norm>200", "phase": "after_backward", "step": 25}
    src.status_at_attach = {**src.status_at_attach, "step": 25, "phase": "after_backward", "paused": src.paused}
    app = StepdbgApp(src, clock=lambda: 1020.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "PAUSED" in header(app), "the header at the pause")
        narrow = header(app)
        assert narrow.endswith("PAUSED [grad_norm>200]") and "lr_explode.py" in narrow, narrow
        await pilot.resize_terminal(160, 48)
        await wait_for(pilot, lambda: "@ vm" in header(app), "the header at 160 columns")
        wide = header(app)
        assert wide.startswith("pid 12345  lr_explode.py @ vm ") and wide.endswith(
            " 20s · step 25 · after_backward · PAUSED [grad_norm>200]"), wide
        assert "00:00:20" not in narrow + wide, (narrow, wide)  # (one spelling: `20s` wherever there is a clock)
