"""A replay another client asked for, of a step the Log has said the replay of, is said in
one line (issue 45's nineteenth walk, 3): `r` in the TUI, then `r` at `stepdbg attach --repl`,
and the Log showed the same `replay of step 30: ...` block twice, with nothing saying who.
Now the second is `replay of step 30 again by another client: the same finding`; the TUI's
own `r` again says `replay of step 30 again: the same finding`. The TUI under Pilot attached
to a real job of demos/nan_log.py at 80x24, a second client beside it; the Log as drawn."""

from __future__ import annotations

import asyncio

import pytest
from conftest import DEMOS, WAIT, wait_for
from test_tui_walk2_log import log_words
from tui_walk import settled

from stepdbg import client

pytestmark = pytest.mark.timeout(300)


def another_clients_replay() -> None:
    with client.connect() as other:
        other.wait_paused(WAIT)
        other.replay()


async def test_a_replay_of_the_same_step_by_another_client_is_said_in_one_line(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        said = f"replay of step {step}"
        await pilot.press("9")  # (the Log's lines are drawn once it is shown)
        await pilot.press("r")
        await wait_for(pilot, lambda: log_words(app).count(said) == 1 and app.replay_result is not None, "r's replay")
        await asyncio.to_thread(another_clients_replay)
        await wait_for(pilot, lambda: log_words(app).count(said) == 2, "the other client's replay in the Log")
        words = log_words(app)
        assert f"{said} again by another client: the same finding" in words, words
        assert words.count("produced the first non-finite value") == 1, words  # (the block once)
        await pilot.press("r")  # the TUI's own, again
        await wait_for(pilot, lambda: log_words(app).count(said) == 3, "r's second replay in the Log")
        await settled(pilot, app)
        words = log_words(app)
        assert f"{said} again: the same finding" in words, words
        assert words.count("produced the first non-finite value") == 1, words


async def test_another_clients_first_replay_says_who_asked(tui_at_break):
    """The first replay of a pause, asked by another client: the Log said `replay of step
    30: ...` as for the TUI's own `r` (the nineteenth walk's leftover)."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        await pilot.press("9")
        await asyncio.to_thread(another_clients_replay)
        await wait_for(pilot, lambda: f"replay of step {step}" in log_words(app), "the other client's replay in the Log")
        words = log_words(app)
        assert f"replay of step {step} (another client asked): " in words, words
