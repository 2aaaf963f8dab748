"""The Break panel's scalars line says it is the break's (issue 45, the twelfth walk's 1): after
`l 0.002` it read `loss ...   lr 0.01 ...` over `LR set to 0.002 and pinned (param group 0,
was 0.01)`, and the old LR read as the LR in force. The line now begins `at the break:`; at
before_backward it still folds between words at 80x24 (9bfd897 made it two lines there). A
real job, Pilot at 80x24, the screen read as the person reads it; failed before its fix."""

from __future__ import annotations

import re

import pytest
from conftest import WAIT, wait_for
from textual.widgets import Input
from tui_walk import screen_text

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def rows(app) -> list[str]:
    """The screen's rows, the panel's border and padding off."""
    return [r.strip(" │┃▌▐█") for r in screen_text(app).splitlines()]


def scalars(app) -> list[str]:
    """The scalars line as drawn: its row and the rows it folded onto (until the next line of
    the panel: the LR set, or where the break is)."""
    lines = rows(app)
    at = next((i for i, r in enumerate(lines) if "data_wait" in r or "lr 0." in r and "LR set" not in r), None)
    if at is None:
        return []
    end = next((i for i in range(at + 1, len(lines)) if re.match(r"(LR set|at \S+:\d+ in |•)", lines[i])), at + 1)
    return lines[at:end]


@pytest.mark.timeout(WAIT * 2)
async def test_the_scalars_line_says_it_is_the_breaks_beside_an_lr_set_since(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "6"), size=(80, 24)) as (app, pilot):
        await wait_for(pilot, lambda: any("step 2 · before_forward" in r for r in rows(app)), "the break")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.focused, Input), "the LR dialog's field")
        await pilot.press(*"0.002", "enter")
        await wait_for(pilot, lambda: any(r.startswith("LR set to 0.002") for r in rows(app)), "the LR set")
        said = scalars(app)
        assert said and said[0].startswith("at the break: ") and "lr 0.01 " in " ".join(said), "\n".join(rows(app))
        for phase in ("after_forward", "before_backward"):
            await pilot.press("n")
            # (the Break panel's own first line: the header says the phase first, and the full suite's
            # run under load read the panel of the pause before)
            await wait_for(pilot, lambda p=phase: any(r.startswith(f"step 2 · {p} ·") for r in rows(app)), phase)
        await wait_for(pilot, lambda: "not measured" in " ".join(scalars(app)), "the before_backward scalars")
        said = scalars(app)
        assert said[0].startswith("at the break: loss "), "\n".join(rows(app))
        assert " ".join(" ".join(said).split()).endswith("grad_norm not measured yet (before the backward)"), said
        words = set("at the break: loss lr data_wait grad_norm not measured yet (before the backward)".split())
        for row in said:  # folded between words: no piece of a word at a row's end or start
            for word in row.split():
                assert word in words or re.fullmatch(r"[\d.e+-]+( ?[mµ]?s)?|s|ms|µs", word), (word, said)
