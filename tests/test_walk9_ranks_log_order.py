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

import pytest
from fake_source import FakeSource
from test_tui_fixes import wait_for
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
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
