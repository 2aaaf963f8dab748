"""Rank 1's Break panel has its break's own numbers, and the end keeps the replay's finding
(issue 45, the seventeenth walk's 3 and 2). ddp_nan on two ranks under torchrun (rank 1 breaks
at step 6 before its backward; every rank pauses for it at the update), a TUI under Pilot at
80x24 attached to both ranks (test_walk14_ranks_attach's tui_after_the_break).

3: after `t`, rank 1's panel said `step 6 · before_backward · [nan] ...` over `at the break:
loss nan   grad_norm nan   lr 0.05`: the grad_norm of the pause at the update, where a
single process's panel says `grad_norm not measured yet (before the backward)`.
2: `r`, `t`, `c`: at the end the panel said `the last break: ... (replay the step to name
it) at ddp_nan.py:45`, the replay's `xb ... dataset index 201` gone."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import wait_for
from test_ranks import WAIT
from test_walk14_ranks_attach import tui_after_the_break, words
from tui_walk import screen_text, settled

pytestmark = pytest.mark.slow  # a real torchrun job on gloo


def _the_break(app: Any) -> str:
    """The Break panel's words from its head to the source (the scalars' line among them)."""
    shown = words(app)
    return shown[shown.find("step 6 ·"):]


@pytest.mark.timeout(WAIT * 3)
async def test_rank_1s_panel_has_its_breaks_numbers_and_the_end_keeps_its_replay(tmp_path, private_runtime_dir):
    wrong: list[str] = []  # (each finding said, both checked in one run of the job)
    async with tui_after_the_break(tmp_path) as (app, pilot, _):
        await pilot.press("t")  # rank 1, the rank that broke
        await wait_for(pilot, lambda: "step 6 · before_backward · [nan]" in words(app), "rank 1's break")
        shown = _the_break(app)
        if "grad_norm nan" in shown or "grad_norm not measured yet (before the backward)" not in shown:
            wrong.append(f"3: rank 1's numbers are not its break's:\n{screen_text(app)}")
        await pilot.press("r")
        await wait_for(pilot, lambda: "replay on rank 1: the data: xb" in words(app), "rank 1's replay on its panel")
        await pilot.press("c")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        app.action_panel("break")
        await settled(pilot, app)
        await wait_for(pilot, lambda: "the last break" in words(app), "the Break panel's last break")
        shown = " ".join(re.sub("[▁▂▃▄▅▆▇█]", " ", screen_text(app)).split())  # (the words, not the scrollbar
        if "replay the step to name it" in shown or "dataset index 201" not in shown:
            wrong.append(f"2: the end lost the replay's finding:\n{screen_text(app)}")
        elif "replay on rank 1: the data: xb" not in shown or "(the replay below names it)" not in shown:
            wrong.append(f"2: the end's replay is not rank 1's, or not pointed at:\n{screen_text(app)}")
    assert not wrong, "\n".join(wrong)
