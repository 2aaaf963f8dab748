"""Issue 45's eighteenth walk's leftovers, 6: the header's host (`@vm`) was shown at 5 s and
gone at 11 s, the clock's new digit taking its room (`pid 123456  nan_log.py @vm  5s · step 31
· ...`, then `nan_log.py     11s · ...`). The clock keeps the room of its widest spelling
under the hour (header.clock_room): as it counts, no part of the header gives way to it. The
TUI under Pilot at 80x24 and 160x48 (a canned source, its clock moved on), and the header's
words at every width."""

from __future__ import annotations

import re

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.header import render_header

pytestmark = pytest.mark.timeout(120)

ARGV = ["python", "demos/nan_log.py"]
PAUSED = {"condition": "nan", "phase": "before_optimizer_step", "step": 31}
UNDER_THE_HOUR = (5.0, 11.0, 65.0, 754.0, 3599.0)
CLOCK = re.compile(r"(\d+h)?(\d+m)?\d+s · ")


def without_clock(line: str) -> str:
    """The header's words but the clock's (and the blanks around it)."""
    return " ".join(CLOCK.sub("", line).split())


def test_no_part_gives_way_as_the_clock_counts_within_the_hour():
    session = {"pid": 123456, "host": "vm", "argv": ARGV}
    status = {"step": 31, "phase": PAUSED["phase"], "state": "paused", "paused": PAUSED}
    changed = []
    for width in range(60, 171):
        lines = [render_header(session, status, e, "connected", width).plain for e in UNDER_THE_HOUR]
        if len({without_clock(line) for line in lines}) > 1:
            changed.append(f"{width}: " + " | ".join(lines))
        assert all(len(line) == width for line in lines), lines
    assert not changed, "\n".join(changed[:6]) + f"\n({len(changed)} in all)"


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_the_header_on_screen_keeps_its_parts_from_5_s_to_11_s(size):
    src = FakeSource(paused=True)
    src.session = {**src.session, "pid": 123456, "host": "vm", "argv": ARGV, "started": 1000.0}
    src.paused = {**(src.paused or {}), **PAUSED}
    src.status_at_attach = {**src.status_at_attach, "step": 31, "phase": PAUSED["phase"], "paused": src.paused}
    now = [1005.0]
    app = StepdbgApp(src, clock=lambda: now[0])
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: " 5s · " in screen_text(app).splitlines()[0], "the header at 5 s")
        at_5 = screen_text(app).splitlines()[0]
        now[0] = 1011.0
        app.refresh_header()
        await wait_for(pilot, lambda: " 11s · " in screen_text(app).splitlines()[0], "the header at 11 s")
        at_11 = screen_text(app).splitlines()[0]
        assert without_clock(at_5) == without_clock(at_11), (at_5, at_11)
        if size[0] == 160:
            assert "@ vm" in at_11, at_11
