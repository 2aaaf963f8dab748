"""The Breaks panel fits its width (issue 45, the sixteenth walk's 8): at 80x24 two long specs
pushed the last column off the edge, cut at `before_backwa` and `before_optimi`. The spec
wraps in its column, and where that is not enough `kind`, then `checked at`, are left out,
said under the table. A real job, the TUI under Pilot, 80x24 and 160x48."""

from __future__ import annotations

import re

import pytest
from conftest import wait_for
from test_tui_fixes import real
from tui_walk import screen_text

PHASES = {"before_forward", "after_forward", "before_backward", "after_backward", "before_optimizer_step",
          "after_optimizer_step", "between"}
LONG = "expr:loss > 4 and step > 100 and grad_norm < 1e9"


@real
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_the_breaks_table_cuts_no_word_at_its_edge(tui_at_break, size):
    async with tui_at_break("--break", "step==1", "--break", "nan", size=size) as (app, pilot):
        await pilot.press("7")
        await wait_for(pilot, lambda: "step==1" in screen_text(app), "the Breaks panel")
        for spec in (LONG, "loss_spike>3"):
            await pilot.press("b", *spec, "enter")
            await wait_for(pilot, lambda s=spec: s.split()[-1] in screen_text(app), f"{spec} added")
        shown = screen_text(app)
        words = re.findall(r"\b(?:before|after)_\w*", shown)
        assert words and set(words) <= PHASES, shown  # (none cut at the edge)
        joined = " ".join(shown.split())
        assert all(part in joined for part in ("expr:loss > 4 and", "grad_norm < 1e9")), shown
