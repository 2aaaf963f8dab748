"""The ranks table names the step the header names (issue 45, a newcomer's walk): during a
torchrun run, between steps, the console's `ranks` (and the TUI's Ranks panel, from the same
rows) said `step 20 between steps` while the header said `after step 19`: the row kept the
status's step, which between steps is the next one's, never begun."""

from __future__ import annotations

import time

import pytest
from test_ranks import WAIT, finish, ranks_of, start

from stepdbg.client.job import Job
from stepdbg.wire.last_step import last_reached

pytestmark = pytest.mark.slow  # torchrun end to end (see pyproject: slow)


@pytest.mark.timeout(WAIT * 2)
def test_the_ranks_rows_name_the_last_step_reached_between_steps(tmp_path, private_runtime_dir):
    # Steps 0 and 1, each followed by 20 s between steps: the table is read in that gap.
    proc = start(tmp_path, "serve", "--break", "step==1", script_args=("--steps", "2", "--sleep", "20"))
    with ranks_of(proc) as clients:
        job = Job(clients)
        for c in clients:
            c.wait_paused(WAIT)
        job.cont()
        deadline = time.monotonic() + WAIT  # (a guard against a hang, never a measure)
        while not all(c.status()["phase"] == "between steps" and c.status()["step"] == 2 for c in clients):
            assert time.monotonic() < deadline and proc.poll() is None, "never between steps 1 and 2"
            time.sleep(0.05)
        assert last_reached(clients[0].status()) == 1  # what the header says: `after step 1`
        lines = job.ranks_text()
        assert [ln.split(" — ")[0].split() for ln in lines] == [
            ["*", "rank", "0:", "running", "step", "1", "between", "steps"],
            ["rank", "1:", "running", "step", "1", "between", "steps"]], lines
    code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]
