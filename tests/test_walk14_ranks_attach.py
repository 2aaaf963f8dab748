"""A second TUI attached to a torchrun job tells each rank's truth (issue 45, the closing
walk's 2; its 4 and 12: test_walk14_ranks_replays, test_walk14_ranks_header). A real
`torchrun --nproc_per_node=2` job on gloo (ddp_nan: rank 1 breaks at step 6 before its
backward; every rank pauses for it at the update), a first front end
(a client of each rank, as the launcher's TUI), and a TUI under Pilot at 80x24 attached after
the break, over both ranks, as `stepdbg attach` in another window.

Its rank 0 Break panel said `at the break, rank 0 (rank 1's have not come)` for good: the
break events came before it attached. Rank 1's pause, which it reads at the attach, holds
rank 1's numbers (tui_after_the_break serves the walk's 4 and 12 too)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import DEMOS, wait_for
from test_ranks import WAIT, finish, ranks_of, start
from tui_walk import screen_text, settled

from stepdbg import client

pytestmark = pytest.mark.slow  # real torchrun jobs on gloo

DEMO = DEMOS / "ddp_nan.py"


@contextlib.asynccontextmanager
async def tui_after_the_break(tmp_path: Any) -> AsyncIterator[tuple[Any, Any, list[Any]]]:
    """(app, pilot, the first front end's clients): the TUI attached once both ranks paused."""
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp
    from stepdbg_tui.job_source import JobSource

    proc = start(tmp_path, "serve", "--break", "nan", script=DEMO)
    source = None
    try:
        with ranks_of(proc) as first:
            for c in first:
                assert c.wait_paused(WAIT) is not None, "a rank never paused"
            source = JobSource([await AsyncClient.connect(i.address, token=i.token) for i in client.find_job()])
            app = StepdbgApp(source)
            async with app.run_test(size=(80, 24)) as pilot:
                await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause at the attach")
                await settled(pilot, app)
                yield app, pilot, first
                app.exit(None)
    finally:
        if source is not None:
            await source.close(then="end")  # (the job ends, not paused for ever)
        finish(proc)


def words(app: Any) -> str:
    return " ".join(screen_text(app).split())


@pytest.mark.timeout(WAIT * 3)
async def test_a_tui_attached_after_the_break_shows_the_ranks_numbers(tmp_path, private_runtime_dir):
    async with tui_after_the_break(tmp_path) as (app, pilot, _):
        shown = words(app)
        assert "have not come" not in shown, screen_text(app)
        assert "at the break, rank 1: loss nan grad_norm nan lr 0.05" in shown, screen_text(app)
