"""At the end the Break panel says the job's last break and what was done about it (issue 45,
the closing walk of 05:50's 28): after corrupt_shard with --on-break rewind broke at step 41
and rewound, the panel said only `the job ended (exit code 0)`; the break and the rewind were
in the Log alone. The job's records are its own (a real run's report: the break and the
change events as the job sent them); the window is a TUI on the running job (Pilot, 80x24)."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)

# corrupt_shard.py's report under `stepdbg --break nan --on-break rewind --keep-every 5`
BREAK = {"step": 41, "phase": "before_backward", "condition": "nan",
         "reason": "loss is inf; the model output is finite: it was born in the loss computation",
         "scalars": {"loss": float("inf"), "grad_norm": None, "data_wait": 0.0006, "lr": [0.025]},
         "where": {"file": "/work/main/demos/corrupt_shard.py", "line": 40, "function": "main",
                   "code": "loss.backward()"}, "details": {"model_output": "finite"}, "at": 1795758975.2,
         "conditions": ["nan"]}
REWIND = {"what": "rewind", "step": 41, "to_step": 40, "batches_skipped": 2, "rewinds": 1,
          "cause": "break [nan] at step 41"}


def words(app: StepdbgApp) -> str:
    return " ".join(screen_text(app).split())


async def test_the_break_panel_at_the_end_says_the_last_break_and_the_rewind():
    src = FakeSource(paused=False)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        src.push("break", BREAK)
        src.push("change", REWIND)
        src.push("exited", {"exit_code": 0, "steps": 80})
        await wait_for(pilot, lambda: "the job ended (exit code 0)" in words(app), "the end on the Break panel")
        shown = words(app)
    assert ("the last break: step 41 (before_backward) [nan]: loss is inf; the model output is finite: it was born "
            "in the loss computation at corrupt_shard.py:40") in shown, shown
    assert "then: change at step 41: rewind to the snapshot of step 40" in shown, shown
