"""The TUI's REPL line turns a breakpoint off and on as the console does (`break off SPEC`,
`break on SPEC`, c75775d): the line ran them as Python (a SyntaxError under the line)."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for
from fake_source import FakeSource

from stepdbg_tui.app import StepdbgApp

pytestmark = pytest.mark.timeout(60)


async def test_the_repl_line_turns_a_breakpoint_off_and_on():
    src = FakeSource(paused=True)
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e", *"break off nan", "enter")
        await wait_for(pilot, lambda: "breakpoint disabled: nan" in text_of(app, "#repl-out"), "the answer")
        assert ("break_enable", ("nan", False)) in src.calls
        await pilot.press(*"break on nan", "enter")
        await wait_for(pilot, lambda: "breakpoint enabled: nan" in text_of(app, "#repl-out"), "the answer")
        assert ("break_enable", ("nan", True)) in src.calls
        assert "SyntaxError" not in text_of(app, "#repl-out")
