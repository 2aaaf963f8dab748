"""The TUI's REPL line says the line it answers above each answer (`» loss`, `» info
ranks`); `p EXPR`'s answer, a tensor's summary, had no `» p loss` line (issue 45, the tenth
newcomer walk's item 4)."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for
from test_tui_keys import started


@pytest.mark.timeout(60)
async def test_p_s_answer_under_the_repl_line_says_the_line():
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("e", "p", "space", *"loss", "enter")
        await wait_for(pilot, lambda: "float32" in text_of(app, "#repl-out"), "the summary")
        assert text_of(app, "#repl-out").startswith("» p loss\n"), text_of(app, "#repl-out")
