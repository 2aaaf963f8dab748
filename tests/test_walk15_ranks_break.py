"""The two TUIs of a torchrun job show rank 1's break the same (issue 45, the closing walk of
05:50's 5). ddp_nan on two ranks: rank 1 breaks at step 6 before its backward (line 45), and
every rank pauses for it at the update (line 46). The launcher's TUI, which saw the break's
event, showed rank 1's panel `step 6 · before_backward · [nan] loss is nan; ...` at line 45,
beside `paused with every rank at step 6 (before_optimizer_step) at ddp_nan.py:46`; a TUI
attached after the break had only the pause and said `before_optimizer_step · [nan] this rank
broke: ...` at line 46. The job keeps the break's record in its pause; the late TUI reads it."""

from __future__ import annotations

import asyncio

import pytest
from conftest import wait_for
from test_ranks import WAIT
from test_walk14_ranks_attach import tui_after_the_break, words
from tui_walk import screen_text, settled

pytestmark = pytest.mark.slow  # real torchrun jobs on gloo


@pytest.mark.timeout(WAIT * 3)
async def test_a_late_tui_shows_rank_1s_break_where_it_broke(tmp_path, private_runtime_dir):
    async with tui_after_the_break(tmp_path) as (app, pilot, first):
        assert (first[1].paused["details"].get("broke") or {}).get("phase") == "before_backward", first[1].paused
        await pilot.press("t")  # rank 1 in view
        await settled(pilot, app)
        shown = words(app)
        assert "step 6 · before_backward · [nan] loss is nan" in shown, screen_text(app)
        assert "ddp_nan.py:45" in shown, screen_text(app)
        assert "paused with every rank at step 6 (before_optimizer_step) at ddp_nan.py:46" in shown, screen_text(app)
        assert "this rank broke" not in shown, screen_text(app)


@pytest.mark.timeout(WAIT * 3)
async def test_after_the_replays_rank_0_points_at_rank_1s_and_the_ranks_panel_asks_no_more(tmp_path,
                                                                                       private_runtime_dir):
    """The closing walk of 05:50's 3 and 4: after r on both ranks, rank 0's head said `(the
    replay below names it)` over its own replay, which says the break is rank 1's; the Ranks
    panel still said `(replay the step to name it)` of both ranks."""
    async with tui_after_the_break(tmp_path) as (app, pilot, first):
        await asyncio.gather(*(asyncio.to_thread(c.replay) for c in first))  # r at the first front end
        await wait_for(pilot, lambda: "replay on rank 0: " in words(app), "rank 0's replay on its panel")
        shown = words(app)
        assert "(rank 1's replay names it: t)" in shown, screen_text(app)
        assert "the replay below names it" not in shown, screen_text(app)
        await pilot.press("0")
        await wait_for(pilot, lambda: "rank 1's replay names it" in words(app), "the Ranks panel's rows")
        shown = words(app)
        assert "replay the step to name it" not in shown, screen_text(app)
        assert "the replay at this pause names it" in shown, screen_text(app)
