"""The Breaks panel's add box takes each spec on its own (issue 45, the closing walk of 05:50's 2):
`b`, `loss>8` Enter, then at once `stale_grad` Enter said `bad condition 'loss>8stale_grad'` and
the second breakpoint was lost. The box was emptied only once the job had answered the first
add, so the keys typed meanwhile were glued to the spec still in it, and the second Enter sent
both. The box is emptied at Enter, before the next key is read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import wait_for
from fake_source import FakeSource
from textual.widgets import DataTable, Input
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


class SlowAdds(FakeSource):
    """The job answers a breakpoint's add only once `answer` is set (a job busy at a pause)."""

    def __init__(self) -> None:
        super().__init__(paused=True)
        self.answer = asyncio.Event()
        self.adds: list[str] = []  # the specs sent, as sent


    async def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:  # type: ignore[override]
        if op == "break_add":
            self.adds.append(args["spec"])
            await self.answer.wait()
        return await super().call(op, timeout, **args)


async def test_a_spec_typed_while_the_first_add_is_answered_is_its_own_breakpoint():
    src = SlowAdds()
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("b")
        box = app.query_one("#break-input", Input)
        await wait_for(pilot, lambda: app.focused is box, "the add box's focus")
        await pilot.press(*"loss>8", "enter", *"stale_grad", "enter")
        await wait_for(pilot, lambda: len(src.adds) == 2, "both adds sent")
        src.answer.set()
        table = app.query_one("#breaks-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 4, "four breakpoints")
        await pilot.pause()
        shown = screen_text(app)
        assert src.adds == ["loss>8", "stale_grad"]
        assert "loss>8stale_grad" not in shown, shown
        assert " loss>8 " in shown and " stale_grad " in shown, shown
        assert box.value == "" and app.focused is box
