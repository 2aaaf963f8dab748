"""The header after the seventh newcomer walk (issue 45, the screen's invariants: what fits
is shown, no word cut to nothing). With a 5-digit pid the header left the host out beside
one or two blank columns (`pid 12345  lr_explode.py   00:00:20 · step 25 · ...`): the
clock, said in fewer columns (`20s`), leaves it room. At 80 columns lr_explode's break read
`PAUSED […]`, the condition cut to nothing: the header says `PAUSED` (the Break panel says
why). The TUI under Pilot at 80x24 and 160x48 (a canned source, any pid), and the header's
words over every width; each failed before its fix."""

from __future__ import annotations

import re

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.header import GAP, clock_room, clock_words, render_header

pytestmark = pytest.mark.timeout(60)

ARGV = ["python", "demos/lr_explode.py"]
PHASES = ("before_forward", "before_backward", "after_backward", "before_optimizer_step")


def left_out_beside_blanks(line: str, host: str, elapsed: float) -> str | None:
    """What the header `line` (its text, its width all of it) leaves out where its blank
    columns would hold it: the host, or the break's condition (`PAUSED` alone beside room
    for `[nan]`); else None. The columns that keep the left and the right apart (GAP) are
    not blank."""
    gaps = [len(m.group(0)) for m in re.finditer(r"(?<=\S) {2,}(?=\S)", line)]
    blank = max(gaps, default=GAP) - GAP + len(line) - len(line.rstrip())
    if clock_words(elapsed) in line:  # the room the clock keeps as it counts is its own (header.clock_room)
        blank -= len(clock_room(elapsed)) - len(clock_words(elapsed))
    room = blank
    if "…]" in line and "[…]" in line:
        return "the condition cut to nothing: `[…]`"
    if f"@ {host}" not in line and f"@{host}" not in line and room >= len(host) + 2:
        return f"the host: {room} columns free, ` @{host}` needs {len(host) + 2}"
    return None


def header_words(pid: int, condition: str, phase: str, width: int, host: str = "vm", elapsed: float = 20.0,
                 argv: list[str] = ARGV) -> str:
    session = {"pid": pid, "host": host, "argv": argv}
    status = {"step": 25, "phase": phase, "state": "paused", "paused": {"condition": condition}}
    return render_header(session, status, elapsed, "connected", width).plain


@pytest.mark.parametrize("pid", [12345, 1234567])
def test_nothing_is_left_out_beside_blank_columns_at_any_width(pid):
    """lr_explode's header, paused on `nan` or `grad_norm>200` in each phase, at every width
    from 70 to 170 columns, the clock under a minute, an hour and more: neither the host nor
    the condition is left out where the blank columns would hold it, and the condition is
    never `[…]`."""
    bad = []
    for condition in ("nan", "grad_norm>200", "loss>0"):
        for phase in PHASES:
            for elapsed in (20.0, 754.0, 3754.0):
                for width in range(70, 171):
                    line = header_words(pid, condition, phase, width, elapsed=elapsed)
                    why = left_out_beside_blanks(line, "vm", elapsed)
                    if why or len(line) != width:
                        bad.append(f"{width}: {line!r}: {why}")
    assert not bad, "\n".join(bad[:12]) + f"\n({len(bad)} in all)"


def test_the_condition_cut_to_nothing_is_left_out_with_its_brackets():
    """lr_explode at 80 columns, paused on `grad_norm>200`: `PAUSED […]` said nothing; then
    `PAUSED` alone, the columns given to the host (the twelfth walk's 2: the break's reason
    went before the host). Now the condition whole: the host gives way first."""
    line = header_words(12345, "grad_norm>200", "after_backward", 78)
    assert line.endswith(" PAUSED [grad_norm>200]") and "@" not in line and "…" not in line, line


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("pid", [12345, 1234567])
@pytest.mark.parametrize("condition", ["nan", "grad_norm>200"])
async def test_the_header_on_screen_shows_what_fits(size, pid, condition):
    """The header as drawn (the screen's first row, its padding column left out), paused
    in lr_explode's backward: nothing left out beside blank columns, no `[…]`, and at
    160 columns everything whole (the clock as `20s`, its one spelling)."""
    src = FakeSource(paused=True)
    src.session = {**src.session, "pid": pid, "host": "vm", "argv": ARGV, "started": 1000.0}
    src.paused = {**(src.paused or {}), "condition": condition, "phase": "after_backward", "step": 25}
    src.status_at_attach = {**src.status_at_attach, "step": 25, "phase": "after_backward", "paused": src.paused}
    app = StepdbgApp(src, clock=lambda: 1020.0)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: "PAUSED" in screen_text(app).splitlines()[0], "the header at the pause")
        line = screen_text(app).splitlines()[0][1:]
        assert len(line) <= size[0] - 1 and left_out_beside_blanks(line, "vm", 20.0) is None, line
        if size[0] == 160:
            assert line.startswith(f"pid {pid}  lr_explode.py @ vm ") and line.endswith(
                f" 20s · step 25 · after_backward · PAUSED [{condition}]"), line
