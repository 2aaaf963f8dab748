"""The Break panel's scalars said `data_wait -s` at a break where the step's data wait was
not measured (issue 45, the last newcomer walk's word 1): a '-' for none, then the unit.
It says `data_wait not measured`. A real job (a loop without a DataLoader: its first
step has nothing to measure its wait from) under the TUI (Pilot), at 80x24."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.timeout(240)
async def test_the_break_panel_says_a_data_wait_not_measured_in_words(tui_at_break):
    async with tui_at_break("--break", "step==0", script_args=("--steps", "3"), size=(80, 24)) as (app, pilot):
        await wait_for(pilot, lambda: "data_wait" in text_of(app, "#break-record"), "the break's scalars")
        record = " ".join(text_of(app, "#break-record").split())
        assert "data_wait not measured" in record, record
        assert "-s" not in record.split(" at /")[0], record  # (the words, not the script's path: /tmp/wt-suite/...)
