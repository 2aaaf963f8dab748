"""The Log of a launched torchrun job puts each rank's break at that rank's own line of it
(issue 45, the ninth walk's 6). Both ranks break at step 16 (`--break step==16`); each says
it on its stderr (`[default1]:stepdbg[rank 1]: break at step 16 ...`) and by its socket.
tui/log_order.py paired an event with whichever rank's line came first: rank 1's line let
rank 0's event out before rank 0's `step 15 loss`, which rank 0 printed before its break
(tests/test_walk8_rank_output_order.py met it in a full run; its Log check was dropped).

The interleaving that real runs meet by chance, made certain: the app gets the job's lines
and the ranks' events (as JobSource gives them: each with its rank) in that order, and the
Log (9) as drawn is read."""

from __future__ import annotations

import random
import re

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.log_order import LogOrder
from stepdbg_tui.messages import JobEvent
from stepdbg_tui.rank_breaks import FROM_RANK

pytestmark = pytest.mark.timeout(120)


def a_break(rank: int) -> dict:
    return {"step": 16, "phase": "before_forward", "condition": "step==16", "reason": f"rank {rank}'s step==16",
            "scalars": {"loss": 0.1}, "where": None, "details": {"pause_at_step": 16}, FROM_RANK: rank}


def said(rank: int) -> str:
    return f"[default{rank}]:stepdbg[rank {rank}]: break at step 16 (before_forward) [step==16]: rank {rank}'s step==16"


def out(stream: str, line: str) -> JobEvent:
    return JobEvent("output", [{"stream": stream, "lines": [line]}])


async def test_a_ranks_break_comes_after_its_own_earlier_lines_whichever_line_comes_first():
    src = FakeSource(paused=False)
    src.torchrun = object()  # (a torchrun job this window launched: its output comes to the Log)
    app = StepdbgApp(src)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("9")
        for message in (out("stdout", "[default0]:step 10 loss 0.2"),
                        out("stderr", said(1)),  # rank 1's line first
                        JobEvent("break", a_break(0)),  # rank 0's event before its line
                        JobEvent("break", a_break(1)),
                        out("stdout", "[default0]:step 15 loss 0.1"),  # printed by rank 0 before its break
                        out("stderr", said(0))):
            app.post_message(message)
        await wait_for(pilot, lambda: screen_text(app).count("break at step 16 [step==16]") == 2, "both breaks")
        rows = [r.strip(" ▊▎") for r in screen_text(app).splitlines()]
        step_15 = next(i for i, r in enumerate(rows) if r.startswith("[default0]:step 15 loss"))
        rank_0 = next(i for i, r in enumerate(rows) if r.startswith("break at step 16 [") and "rank 0's" in r)
        assert step_15 < rank_0, "\n".join(rows)
        assert "break at step 16 [step==16] on rank 0: rank 0's step==16" in rows, "\n".join(rows)  # (whose)


def _merged(rng: random.Random, *sources: list) -> list:
    """The sources' items in one order, each source's own kept (a random interleaving)."""
    left = [list(s) for s in sources]
    out = []
    while any(left):
        out.append(rng.choice([s for s in left if s]).pop(0))
    return out


def _round(step: int) -> list[list]:
    """ddp_nan's break at `step`, as each rank sends it: rank 1 breaks before its backward,
    then both pause before the update for it; rank 0 printed `step N-1 loss` before."""
    why = "loss is nan"
    orig = {"step": step, "phase": "before_backward", "condition": "nan", "reason": why, "scalars": {"loss": "nan"},
            "where": None, "details": {"pause_at_step": step}, FROM_RANK: 1}
    mine = {**orig, "phase": "before_optimizer_step", "reason": f"this rank broke: {why}",
            "details": {"for_rank": 1, "broke_at": step}}
    theirs = {**mine, "condition": "rank 1", "reason": f"paused for rank 1's break at step {step}: {why}",
              FROM_RANK: 0}
    line = "[default{0}]:stepdbg[rank {0}]: break at step {1} ({2}) [{3}]: {4}"
    return [[JobEvent("break", orig), JobEvent("break", mine)],
            [JobEvent("break", theirs), JobEvent("paused", {**theirs, "phase": "before_optimizer_step"})],
            [out("stdout", f"[default0]:step {step - 1} loss 0.5"),
             out("stderr", line.format(0, step, "before_optimizer_step", "rank 1", theirs["reason"]))],
            [out("stderr", line.format(1, step, "before_backward", "nan", why)),
             out("stderr", line.format(1, step, "before_optimizer_step", "nan", mine["reason"]))]]


@pytest.mark.parametrize("seed", [45, 9, 6])
async def test_a_break_of_the_job_is_said_once_before_the_pause_of_the_rank_in_view_in_any_order(seed):
    """ddp_nan's break (rank 1's NaN, rank 0 in view), its three events and four lines in
    random orders (seeded): the Log says the break once, naming rank 1, and `paused at step
    N` after it and after rank 0's `step N-1 loss` (the walk met `paused at step 6` before
    the break, and, once the break was said once, before rank 0's `step 5 loss`)."""
    from stepdbg_tui.panels import WholeWidthLog

    rng = random.Random(seed)
    src = FakeSource(paused=False)
    src.torchrun, src.current = object(), 0  # (rank 0 in view, as JobSource's)
    app = StepdbgApp(src)
    steps = range(100, 124)
    async with app.run_test(size=(160, 48)) as pilot:
        for step in steps:
            for message in _merged(rng, *_round(step)):
                app.post_message(message)
            await wait_for(pilot, lambda s=step: any(str(t).startswith(f"paused at step {s} ")
                                                     for t in app.query_one(WholeWidthLog).kept),
                           f"the pause at step {step}")
        await wait_for(pilot, lambda: not LogOrder.of(app, print).unsaid, "every event said")
        rows = [str(t) for t in app.query_one(WholeWidthLog).kept]
    bad = []
    for step in steps:
        said = [i for i, r in enumerate(rows) if r.startswith(f"break at step {step} ")]
        paused = rows.index(next(r for r in rows if r.startswith(f"paused at step {step} ")))
        before = rows.index(f"[default0]:step {step - 1} loss 0.5")
        # (its words: rank 1's, or, where rank 0's pause for it came first, rank 0's: `[rank 1] on rank 1:
        # paused for rank 1's break at step N: loss is nan`)
        if len(said) != 1 or not re.match(rf"break at step {step} \[(nan|rank 1)\] on rank 1: .*loss is nan", rows[said[0]]) \
                or not said[0] < paused or not before < paused:
            bad.append(f"step {step}: " + " | ".join(rows[min([before, paused, *said]):paused + 1]))
    assert not bad and not [r for r in rows if "stepdbg[rank" in r], "\n".join(bad)
