"""A lone word on the TUI's REPL line that is neither its command nor a name of the paused
frame (issue 45's eighteenth walk, 7): `qe` showed Python's `Traceback (most recent call
last): ... NameError: name 'qe' is not defined` under the line (the issue's invariant: no
exception text on screen), where the console says `qe: not a command, nor a name in the paused
frame`. Now in words, with the line's words it may mean. A real job under Pilot at 80x24."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for

pytestmark = pytest.mark.timeout(300)


async def test_a_lone_unknown_word_is_said_in_words_not_a_traceback(tui_at_break):
    async with tui_at_break("--break", "step==2") as (app, pilot):
        await pilot.press("e", *"qe", "enter")
        await wait_for(pilot, lambda: "not a command" in text_of(app, "#repl-out"), "the words")
        said = " ".join(text_of(app, "#repl-out").split())
        assert "qe: not a command of this line, nor a name in the paused frame" in said, said
        assert "Traceback" not in said and "NameError" not in said, said
        await pilot.press(*"1/0", "enter")  # (the user's code that raises: its traceback, as Python says it)
        await wait_for(pilot, lambda: "ZeroDivisionError" in text_of(app, "#repl-out"), "the user's error")
