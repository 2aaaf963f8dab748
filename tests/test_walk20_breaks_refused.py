"""Issue 45's nineteenth newcomer walk, 2: a spec the job refused comes back into the Breaks
panel's add box to be mended, with the cursor at its end. It came back with the cursor at
its start: `loss>` refused, then `5` typed made `5loss>`, and ctrl+u cleared nothing. A real
job under Pilot at 80x24, the box as drawn."""

from __future__ import annotations

import pytest
from conftest import wait_for
from textual.widgets import Input
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)


def shown(app) -> str:
    return " ".join(screen_text(app, skip=()).split())


async def test_a_refused_spec_comes_back_with_the_cursor_at_its_end(tui_at_break):
    async with tui_at_break("--break", "step==2") as (app, pilot):
        sent: list[str] = []
        add = app.source.add_break
        app.source.add_break = lambda spec: (sent.append(spec), add(spec))[1]
        await pilot.press("7", "b", *"loss>", "enter")
        await wait_for(pilot, lambda: sent == ["loss>"], "the spec sent")
        await settled(pilot, app)
        box = app.query_one("#break-input", Input)
        assert app.focused is box and "loss needs a value" in shown(app), shown(app)
        await pilot.press("5")
        await settled(pilot, app)
        assert "loss>5" in shown(app) and "5loss>" not in shown(app), shown(app)
        await pilot.press("ctrl+u")
        await settled(pilot, app)
        assert box.value == "" and "loss>" not in shown(app), shown(app)
