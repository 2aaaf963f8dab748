"""The Tensor panel's slice box and the values shown agree (issue 45's eighteenth walk, 1): a
slice typed for one tensor (`40` of x, [64, 8]) stayed in its box when Enter on a Model row
opened another (model.head's first parameter, [32, 8]) that it does not fit: the values shown
were at that tensor's start, under a box still reading `40`, and the refusal was said under
the histogram, below the fold at 80x24. Now the box is emptied and the panel says so under
it, on screen. A real job under Pilot at 80x24."""

from __future__ import annotations

import pytest
from conftest import DEMOS, wait_for
from textual.widgets import Input
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)


async def test_a_slice_that_does_not_fit_the_next_tensor_opened_is_emptied_and_said(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("3")
        await settled(pilot, app)
        app.query_one("#tensor-name", Input).value = "x"
        await pilot.press("tab", "4", "0", "enter")  # (3: the name field; Tab: the slice)
        await wait_for(pilot, lambda: "at the slice 40 typed" in screen_text(app, skip=()), "x at 40")
        await pilot.press("escape", "2")
        model = app.query_one("#model-table")
        await wait_for(pilot, lambda: model.row_count > 2, "the modules")
        await settled(pilot, app)
        await pilot.press("down", "down", "enter")
        await wait_for(pilot, lambda: "model.head.0.weight" in screen_text(app, skip=()), "the head's weight")
        await settled(pilot, app)
        shown = screen_text(app, skip=())
        words = " ".join(shown.split())
        box = app.query_one("#tensor-index", Input).value
        assert box == "", (box, shown)  # (it read 40 over values at the start)
        assert "the slice field is emptied" in words and "the values below are at its start" in words, shown
