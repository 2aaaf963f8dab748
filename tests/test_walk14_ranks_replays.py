"""Each rank's replay on its own Break panel, named, and r at a replayed pause says so (issue
45, the closing walk's 4). ddp_nan on two ranks under torchrun, a TUI attached after the break
(test_walk14_ranks_attach) while a first front end replays on every rank: rank 0's panel
showed rank 1's answer (`the data: xb ...`, no rank named), rank 1's `press r to replay`; and
r replayed both ranks again, saying nothing. Now each rank's panel shows its own replay under
its rank's name, r says the step was replayed at this pause and what r again does, and r
again replays every rank."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import wait_for
from test_ranks import WAIT
from test_tui_keys import log_text
from test_walk14_ranks_attach import tui_after_the_break, words
from textual.widgets import Static
from tui_walk import plain, screen_text, settled

pytestmark = pytest.mark.slow  # real torchrun jobs on gloo


def replays_said(app: Any, rank: int) -> int:
    """How many replays of step 6 on `rank` the Log has said (a replay of the same finding
    again in one line: `replay of step 6 on rank 0 again: the same finding`)."""
    return log_text(app).count(f"replay of step 6 on rank {rank}")


async def _replays_said(pilot: Any, app: Any, n: int) -> None:
    """The Log has said `n` replays of step 6 of each rank (9 shows it; 1 goes back)."""
    await pilot.press("9")
    for rank in (0, 1):
        await wait_for(pilot, lambda r=rank: replays_said(app, r) >= n, f"rank {rank}'s replay number {n} in the Log")
    await pilot.press("1")
    await settled(pilot, app)


@pytest.mark.timeout(WAIT * 3)
async def test_each_ranks_replay_is_on_its_own_panel_and_r_says_it_ran(tmp_path, private_runtime_dir):
    async with tui_after_the_break(tmp_path) as (app, pilot, first):
        await asyncio.gather(*(asyncio.to_thread(c.replay) for c in first))  # the first front end's r
        await _replays_said(pilot, app, 1)
        shown = words(app)
        assert "replay on rank 0: the replay produced no non-finite value" in shown, screen_text(app)
        assert "dataset index 201" not in shown and "press r to replay" not in shown, screen_text(app)
        await pilot.press("t")  # rank 1: its own replay, which names the input
        await settled(pilot, app)
        shown = words(app)
        assert "replay on rank 1: the data: xb already holds 1 non-finite value" in shown, screen_text(app)
        assert "dataset index 201" in shown and "press r to replay" not in shown, screen_text(app)
        await pilot.press("r")  # replayed already: said, nothing replayed
        await settled(pilot, app)
        said = " ".join(plain(app.query_one("#repl-out", Static)).split())
        assert said == ("step 6 was replayed at this pause on ranks 0 and 1: each rank's answer is on its Break "
                        "panel (t switches ranks); r again replays it on every rank"), said
        await pilot.press("9")
        await settled(pilot, app)
        assert (replays_said(app, 0), replays_said(app, 1)) == (1, 1), log_text(app)
        await pilot.press("1", "r")  # r again: every rank replays again
        await _replays_said(pilot, app, 2)
        assert "replay on rank 1: the data: xb" in words(app), screen_text(app)
