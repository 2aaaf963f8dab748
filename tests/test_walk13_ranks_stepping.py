"""Under torchrun, n on the rank that broke moves it (issue 45, the thirteenth walk's 1). A real `torchrun --nproc_per_node=2`
job on gloo (ddp_nan: rank 1 breaks at step 6, before its backward; every rank pauses for it
at the update), the TUI under Pilot at 80x24 over both ranks, as a newcomer's walk met it.

1. `o 1` Enter, `n`, `0`: rank 1 stayed at before_optimizer_step, `paused at the next pause
   point (before_optimizer_step)`: the pause for a rank's break is held just before that
   pause point, where `n` stopped again. Now it goes on to after_optimizer_step.
(tui_over_ranks and row_of serve test_walk13_ranks_end too.)"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import DEMOS, wait_for
from test_ranks import WAIT, finish, start
from tui_walk import screen_text, settled

from stepdbg import client
from stepdbg.wire import sessions

pytestmark = pytest.mark.slow  # real torchrun jobs on gloo

DEMO = DEMOS / "ddp_nan.py"


@contextlib.asynccontextmanager
async def tui_over_ranks(tmp_path: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The TUI at 80x24 over ddp_nan's two ranks, from the pause for rank 1's break."""
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp
    from stepdbg_tui.job_source import JobSource

    proc = start(tmp_path, "serve", "--break", "nan", script=DEMO)
    source = None
    try:
        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "the ranks never announced themselves"
            time.sleep(0.1)
        source = JobSource([await AsyncClient.connect(i.address, token=i.token) for i in client.find_job()])
        app = StepdbgApp(source)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause for rank 1's break")
            await wait_for(pilot, lambda: all(c.paused for c in source.clients), "both ranks paused")
            yield app, pilot
            app.exit(None)
    finally:
        if source is not None:
            await source.close(then="end")  # (a failure too: the job ends, not paused for ever)
        finish(proc)


def row_of(shown: str, rank: int) -> str:
    """The Ranks panel's row of `rank` on screen (its first line)."""
    rows = [ln for ln in shown.splitlines() if re.match(rf"\s*(▶ )?{rank}\s+(paused|running|exited|dead|in) ", ln)]
    assert len(rows) == 1, shown
    return rows[0]


@pytest.mark.timeout(WAIT * 3)
async def test_n_moves_the_rank_that_broke_one_pause_point_on(tmp_path, private_runtime_dir):
    async with tui_over_ranks(tmp_path) as (app, pilot):
        broke = app.source.clients[1].paused
        assert (broke["step"], broke["phase"]) == (6, "before_optimizer_step"), broke
        await pilot.press("o", "1", "enter")  # stepping goes to rank 1
        await settled(pilot, app)
        await pilot.press("n")
        await wait_for(pilot, lambda: app.source.clients[1].paused not in (None, broke), "rank 1's next pause")
        await pilot.press("0")
        await settled(pilot, app)
        shown = screen_text(app)
        row = row_of(shown, 1)
        assert "paused" in row and "after_optimizer_step" in row, shown
        assert "paused at the next pause point (after_optimizer_step)" in " ".join(shown.split()), shown
        assert "before_optimizer_step" in row_of(shown, 0), shown  # (rank 0 was not sent the n)
