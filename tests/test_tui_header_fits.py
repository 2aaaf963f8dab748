"""The header at 80 columns keeps the script's name whole (issue 45, item 9): over a
torchrun job's ranks, with a cluster's host name and a six-digit pid, from the first frame
on. What gives way does so whole, in a defined order (tui/header.py: the host, the script's
arguments, the clock, the pid, the break's condition; each put back where it fits), never as a cut word (the
arguments left out are a `…`, an option never without its value).

Before: `pid 123456 rank 0/4  nan_log.p… 00:12:34 · step 30 …` until the header's first
refresh a second later (it was fitted to no width before the layout), then
`nan_log.py @ gpu-nod…`; paused, `nan_log.py @ … 00:12:34`."""

from __future__ import annotations

import re

import pytest
from fake_source import FakeJobSource, FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.header import GAP, render_header

pytestmark = pytest.mark.timeout(60)

HOST = "gpu-node-017.cluster.example.org"
ARGV = ["python", "demos/nan_log.py", "--steps", "100"]


def header_line(app: StepdbgApp) -> str:
    return screen_text(app).splitlines()[0]


@pytest.mark.parametrize("source", [FakeJobSource, lambda: FakeSource(paused=True)], ids=["ranks", "paused"])
async def test_at_80x24_the_header_names_the_script_whole_from_the_first_frame(source):
    """The first frame and every one after: `nan_log.py` whole, the rank beside it, the
    state whole at the right end, no word cut (no ellipsis)."""
    src = source()
    src.session = {**src.session, "host": HOST, "pid": 123456, "argv": ARGV}
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        first = header_line(app)  # what is drawn before the header's next refresh
        app.status = {**app.status, "step": 31}  # a step summary: drawn again
        await wait_for(pilot, lambda: "step 31 · " in header_line(app), "the header to show step 31")
        for line in (first, header_line(app)):
            assert " nan_log.py " in line and "…" not in cut_words(line) and "@ gpu" not in line, line
            assert ("rank 0/4  nan_log.py" in line) == (source is FakeJobSource), line
            assert line.rstrip().endswith("RUNNING" if source is FakeJobSource else "PAUSED [nan]"), line


def cut_words(line: str) -> str:
    """The line less the one `…` allowed: after the script's name, for arguments left out
    whole (an option with its value: item 8 of the second walk)."""
    return line.replace("nan_log.py …", "nan_log.py", 1)


def words(width: int, condition: str = "nan", rank: int | None = 0) -> str:
    session = {"pid": 123456, "host": HOST, "argv": ARGV, "rank": rank, "world_size": 8}
    status = {"step": 1234, "phase": "before_optimizer_step", "state": "paused", "paused": {"condition": condition}}
    return render_header(session, status, 754.0, "connected", width).plain


def test_the_parts_give_way_whole_in_their_order():
    """Narrowed one column at a time: the host goes first, then the argument, the clock,
    the pid, and the break's condition last (to `PAUSED` alone: the Break panel says it
    whole; at 80 columns lr_explode's `[grad_norm>200]` went before the host, the twelfth
    walk's 2); the script's name, the rank and the state stay, each part whole or gone (the
    host may be spelt narrower: ` @vm`; the clock is `12m34s` at every width). (Walk 3, item
    9: at 80 columns the pid and the clock went before a long condition, cut mid-word.)"""
    wide = words(200)
    assert wide.startswith(f"pid 123456 rank 0/8  nan_log.py --steps 100 @ {HOST} ") and "12m34s · " in wide, wide
    gone_at = {}
    least = len("rank 0/8  nan_log.py step 1234 · before_optimizer_step · PAUSED") + GAP - 1  # all given way
    for width in range(len(wide), least - 1, -1):
        line = words(width)
        assert len(line) == width and "nan_log.py" in line and "rank 0/8" in line, (width, line)
        for part, text in (("host", rf" @ ?{HOST}"), ("argument", "--steps"), ("condition", r"\[nan\]"),
                           ("clock", "12m34s · "), ("pid", "pid 123456")):
            if not re.search(text, line):
                gone_at.setdefault(part, width)
        assert "…" not in cut_words(line) and "[]" not in line and not re.search(r"--steps(?! 100)", line), (
            width, line)
    assert list(gone_at) == ["host", "argument", "clock", "pid", "condition"], gone_at
    assert words(80, rank=None).startswith("pid 123456  nan_log.py "), words(80, rank=None)


def test_a_long_condition_gives_way_by_whole_words_before_the_pid_and_clock():
    """`PAUSED [expr:loss > 4 and step > 100]` at 70 to 160 columns: the condition keeps as
    many whole words as fit, then `…`, its first word at every width (the pid and the clock
    give way before it); its further words give way before the pid and the clock (once they
    went first, and the condition was cut mid-word)."""
    spec = "expr:loss > 4 and step > 100"
    for width in range(70, 161):
        line = words(width, condition=spec, rank=None)
        shown = line[line.index("PAUSED [") + 8:line.rindex("]")] if "PAUSED [" in line else ""
        assert shown == spec or spec.startswith(shown.removesuffix(" …") + " "), (width, line)
        least = len("pid 123456  nan_log.py") + GAP + len("12m34s · step 1234 · before_optimizer_step · PAUSED [expr:loss …]")
        if width >= least:  # (where the pid, the clock and the first word fit)
            assert line.startswith("pid 123456  nan_log.py") and "12m34s · " in line, (width, line)
