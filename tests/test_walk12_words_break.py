"""The Break panel says what the step has not measured yet at before_backward too (issue 45,
the twelfth walk's 3): after_forward said `loss and grad_norm not measured yet (before the
backward)`, and one `n` later the panel showed a bare `grad_norm -` (the loss read, the
gradients not made). A real job under Pilot at 80x24; failed before its fix."""

from __future__ import annotations

import pytest
from conftest import WAIT, text_of, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def record(app) -> str:
    return " ".join(text_of(app, "#break-record").split())


@pytest.mark.timeout(WAIT * 2)
async def test_before_the_backward_the_break_panel_says_grad_norm_not_measured_yet(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "6"), size=(80, 24)) as (app, pilot):
        await wait_for(pilot, lambda: "step 2 · before_forward" in record(app), "the break")
        for phase in ("after_forward", "before_backward"):
            await pilot.press("n")
            await wait_for(pilot, lambda p=phase: f"step 2 · {p}" in record(app), phase)
        await wait_for(pilot, lambda: "grad_norm" in record(app), "the scalars")
        said = record(app)
        assert "grad_norm not measured yet (before the backward)" in said, said
        assert "grad_norm -" not in said, said
        assert "loss not measured" not in said and "loss -" not in said, said  # (the loss is read: its number)
