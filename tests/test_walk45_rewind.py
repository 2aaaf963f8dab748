"""A rewind at a pause, as a newcomer meets it (issue 45, a newcomer's walk): `R` let the
job run on without a word of it, the header then ended at `step 60` for a loop whose last
step is 59 (the Plots: `the job ended in step 60, which did not finish`), and `3 batches
skipped` was said of a loop that drew the very same batches again (step 18's loss was
step 15's). The phantom step was the loop's `opt.zero_grad()` after its last `opt.step()`:
it made a step state the end took for a step begun."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import DEMOS, ROOT, WAIT, text_of, wait_for
from test_tui_walk2_log import log_words
from tui_walk import header_text

pytestmark = pytest.mark.usefixtures("private_runtime_dir")

RNG_LOOP = """
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(12):
        x = torch.randn(8, 4)  # the batch from the global RNG, as a get_batch() does
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step} loss {loss.item():.6f}", flush=True)
    print("done")
"""


def test_a_rewind_at_the_console_says_what_it_undoes_and_that_the_job_runs_on(tmp_path):
    """At a break at step 7, `rewind`: back to the snapshot of step 5 where step 7 ends. The
    loop draws its batches from the RNGs the rewind put back, so step 8 draws step 5's batch
    again (the same loss): nothing may say batches were skipped. The answer says the job runs
    on, and the next break, at step 9, is the loop's own step 9."""
    script = tmp_path / "rng_loop.py"
    script.write_text(textwrap.dedent(RNG_LOOP))
    proc = subprocess.run(
        [sys.executable, "-m", "stepdbg", "--keep-every", "5", "--break", "step==7", "--break", "step==9",
         "--on-break", "pause", sys.executable, str(script)],
        cwd=ROOT, input="rewind\nc\n", capture_output=True, text=True, timeout=WAIT,
        env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert proc.returncode == 0, proc.stderr
    losses = dict(re.findall(r"^step (\d+) loss (\S+)$", proc.stdout, re.M))
    assert losses["8"] == losses["5"], proc.stdout  # the batch drawn again: not skipped
    assert "batches skipped" not in proc.stderr and "batch skipped" not in proc.stderr, proc.stderr
    assert "stepdbg: change: rewind to the snapshot of step 5 (steps 5 to 7 undone)" in proc.stderr, proc.stderr
    assert ("rewinding to the snapshot of step 5 where step 7 ends (steps 5 to 7 undone); "
            "the job runs on to its next break") in proc.stderr, proc.stderr
    assert "stepdbg: break at step 9 (before_forward) [step==9]" in proc.stderr, proc.stderr
    assert proc.stdout.index("step 8 loss") < proc.stdout.index("step 9 loss")  # the loop's step 9 is stepdbg's


@pytest.mark.slow
@pytest.mark.timeout(WAIT * 2)
async def test_R_in_the_tui_says_the_job_runs_on_and_the_end_is_the_loops_last_step(tui_at_break):
    """nan_log at its NaN break (step 30): s, then R. The toast says the job runs on; at the
    end the header names step 59, the loop's last, and the Plots say no step went unfinished."""
    async with tui_at_break("--break", "nan", "--keep-every", "5", script=DEMOS / "nan_log.py",
                            notifications=True) as (app, pilot):
        await pilot.press("s")
        await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status.get("step") == 31,
                       "the pause at step 31")
        await pilot.press("R")
        await wait_for(pilot, lambda: "job ended" in header_text(app), "the job's end")
        toasts = " | ".join(str(n.message) for n in app.raised)  # (raised: one shown may have timed out by the end)
        assert "the job runs on" in toasts, toasts
        assert re.search(r"\bstep 59 · job ended", header_text(app)), header_text(app)
        await pilot.press("6")
        await wait_for(pilot, lambda: "the plots are its record" in text_of(app, "#plots-unfinished"), "the Plots' note")
        note = text_of(app, "#plots-unfinished")
        assert "step 59" in note and "did not finish" not in note, note
        await pilot.press("9")
        await wait_for(pilot, lambda: "the job ended with exit code" in log_words(app), "the Log's end")
        assert "rewind to the snapshot of step 30 (steps 30 and 31 undone)" in log_words(app), log_words(app)
