"""The eleventh newcomer walk's 4 (issue 45): at after_forward the Break panel showed a bare
`loss -   grad_norm -`, while before_forward said `loss and grad_norm not measured yet (before
the forward)`. The step measures its loss at the backward and its grad_norm after it
(conditions.SCALAR_PHASE): after the forward the panel says both are not measured yet.
A real job under Pilot at 80x24; failed before its fix."""

from __future__ import annotations

import pytest
from conftest import WAIT, text_of, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def record(app) -> str:
    return " ".join(text_of(app, "#break-record").split())


@pytest.mark.timeout(WAIT * 2)
async def test_after_the_forward_the_break_panel_says_loss_and_grad_norm_not_measured_yet(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "6"), size=(80, 24)) as (app, pilot):
        await wait_for(pilot, lambda: "step 2 · before_forward" in record(app), "the break")
        await pilot.press("n")
        await wait_for(pilot, lambda: "step 2 · after_forward" in record(app), "the pause after the forward")
        said = record(app)
        assert "loss and grad_norm not measured yet (before the backward)" in said, said
        assert "loss -" not in said and "grad_norm -" not in said, said
