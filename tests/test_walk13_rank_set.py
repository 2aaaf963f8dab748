"""`o`'s question says which ranks get stepping and changes now (issue 45, the twelfth walk's
14: the dialog asked for a set with no word of the one in force)."""

from __future__ import annotations

import pytest
from conftest import wait_for
from fake_source import FakeJobSource

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


def screen(app: StepdbgApp) -> str:
    return " ".join(app.export_screenshot().replace("&#160;", " ").split())


async def test_the_rank_question_says_the_set_in_force():
    app = StepdbgApp(FakeJobSource(), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "0 Ranks" in screen(app), "the tab bar")
        await pilot.press("o")
        await wait_for(pilot, lambda: "0,2-3 or all); now: every rank" in screen(app), "o's question")
        await pilot.press("1", "enter")
        await wait_for(pilot, lambda: app.source.targets == [1], "the set")
        await pilot.press("o")
        await wait_for(pilot, lambda: "0,2-3 or all); now: rank 1" in screen(app), "o's question, again")
