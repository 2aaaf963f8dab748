"""After a torchrun job ends, the Ranks panel names the step the header names (issue
45, the eighth walk's item 1): a real `torchrun --nproc_per_node=2` job on gloo (CPU), the
TUI under Pilot over both ranks, the Ranks panel shown while the job ran to its end. The
note said `this shows step 20, the last step this panel saw` under a header's `step 19`:
the panel kept the status's step, which between steps is the next one's, never begun. Since
the thirteenth walk's 2 the panel shows each rank's own end (exited, its last step) in place
of that note: each row names the header's step."""

from __future__ import annotations

import re
import time

import pytest
from conftest import wait_for
from test_ranks import WAIT, finish, start
from tui_walk import header_text

from stepdbg import client
from stepdbg.wire import sessions

pytestmark = pytest.mark.slow  # real trainers and torchrun end to end (see pyproject: slow)


@pytest.mark.timeout(WAIT * 3)
async def test_the_ranks_panels_note_at_the_end_names_the_headers_step(tmp_path, private_runtime_dir):
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp
    from stepdbg_tui.job_source import JobSource
    from stepdbg_tui.panels import RanksPanel

    # Steps 0..3, each followed by 3 s between steps: the panel answers while the job is there.
    proc = start(tmp_path, "serve", "--break", "step==1", script_args=("--steps", "4", "--sleep", "3"))
    try:
        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        source = JobSource([await AsyncClient.connect(i.address, token=i.token) for i in client.find_job()])
        app = StepdbgApp(source)
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause at step 1")
            await pilot.press("0")
            panel = app.query_one(RanksPanel)
            await wait_for(pilot, lambda: panel.shown is not None, "the Ranks panel")
            await pilot.press("c")
            await wait_for(pilot, lambda: app.history and app.history[-1]["step"] == 3, "the last step's record")
            answers: list[object] = []
            answered = panel.answered
            panel.answered = lambda: (answered(), answers.append(app.status.get("phase")))  # type: ignore[method-assign]
            await wait_for(pilot, lambda: answers or "job ended" in app.connection, "an answer after the last step")
            assert answers, "the job ended before the panel answered after its last step (nothing tested)"
            await wait_for(pilot, lambda: "job ended" in app.connection, "the job's end")
            # Since the thirteenth walk's 2 the panel shows each rank's own end, not a note over its last rows.
            await wait_for(pilot, lambda: panel.shown and all(r["state"] == "exited" for r in panel.shown[0]),
                           "each rank's end on the panel")
            header = header_text(app)
            shown = re.search(r"step (\d+) · job ended", header)
            steps = [r["step"] for r in panel.shown[0]]
            assert shown and steps == [int(shown.group(1))] * 2 == [3, 3], (steps, header)
            assert not panel.query("#ended-note"), header
            await pilot.press("q")
        await source.close()
    finally:
        code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]
