"""After a torchrun job ends the Ranks panel says each rank's own end (issue 45, the
thirteenth walk's 2). ddp_nan on two ranks (test_walk13_ranks_stepping's TUI at 80x24): after
`c` to the end the panel kept its last pause's rows (`paused 6 before_optimizer_step` on both
ranks) under `this shows step 6, the last step this panel saw`, while the header said `step 19
· job ended`, and `▶` on rank 0 with rank 1 in view. Now each row is the rank's end: exited,
step 19, ended, and `▶` on the rank in view."""

from __future__ import annotations

import pytest
from conftest import wait_for
from test_ranks import WAIT
from test_walk13_ranks_stepping import row_of, tui_over_ranks
from tui_walk import screen_text, settled

pytestmark = pytest.mark.slow  # real torchrun jobs on gloo


@pytest.mark.timeout(WAIT * 3)
async def test_the_ranks_panel_after_the_end_shows_each_ranks_end(tmp_path, private_runtime_dir):
    async with tui_over_ranks(tmp_path) as (app, pilot):
        await pilot.press("0")  # the Ranks panel at the pause: step 6 on both
        await settled(pilot, app)
        assert "6" in row_of(screen_text(app), 1).split(), screen_text(app)
        await pilot.press("t")  # rank 1 in view
        await settled(pilot, app)
        await pilot.press("c")
        await wait_for(pilot, lambda: "job ended" in app.connection, "the job's end")
        await pilot.press("1", "0")  # away and back, as the walk did
        await settled(pilot, app)
        shown = screen_text(app)
        assert "the last step this panel saw" not in shown, shown
        for rank in (0, 1):
            row = row_of(shown, rank)
            assert [w for w in row.split() if w != "▶"][:4] == [str(rank), "exited", "19", "ended"], shown
        assert row_of(shown, 1).strip().startswith("▶ 1") and not row_of(shown, 0).strip().startswith("▶"), shown
