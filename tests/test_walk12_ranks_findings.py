"""A finding of a job of many ranks is said once in the Log, naming the rank that found it,
as a break is (issue 45, the twelfth walk's 4): every rank sends its own findings, and the
Log said the same finding once per rank, naming none. Pilot, a fake source whose events
carry the rank that sent them (as JobSource adds it), the Log as shown at 120x40."""

from __future__ import annotations

from conftest import wait_for
from fake_source import FakeSource

STALE = {"rule": "stale_grad", "severity": "error", "step": 1, "message": "the gradients of step 0 are still in .grad",
         "advice": "call zero_grad", "data": {}}


def log_text(app) -> str:
    """The lines of the Log panel (drawn once it has been shown)."""
    return "\n".join(str(line.text) for line in app.query_one("LogPanel RichLog").lines)


async def test_a_finding_every_rank_sends_is_said_once_naming_its_rank():
    from stepdbg_tui.app import StepdbgApp

    src = FakeSource(paused=True)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        src.push("finding", {**STALE, "from_rank": 0})
        src.push("finding", {**STALE, "from_rank": 1})
        src.push("finding", {**STALE, "rule": "lr_spike", "message": "rank 1's own words", "from_rank": 1})
        await pilot.press("9")
        await wait_for(pilot, lambda: "rank 1's own words" in log_text(app), "the last finding in the Log")
        said = [ln for ln in log_text(app).splitlines() if ln.startswith("finding ")]
        assert said == ["finding [stale_grad] on rank 0: the gradients of step 0 are still in .grad",
                        "finding [lr_spike] on rank 1: rank 1's own words"], said
        assert [f["rule"] for f in app.findings] == ["stale_grad", "lr_spike"]  # (the Break panel's, once too)
