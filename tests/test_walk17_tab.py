"""The REPL line's Tab (issue 45's seventeenth walk, 9): `opt.param_groups[0].<Tab>` offered
nothing and said nothing; after `model.<Tab>` listed its names, `opt.param_g<Tab>` completed
`opt.param_groups` and left `model`'s list under the line. After an index or a call Tab says
why it does not complete there; a Tab that completes one name takes the earlier list down.
A real job under Pilot at 80x24."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for
from textual.widgets import Input

from stepdbg_tui.repl_complete import NOT_AFTER_INDEX

pytestmark = pytest.mark.timeout(300)


async def test_tab_after_an_index_says_why_and_a_completion_takes_the_old_list_down(tui_at_break):
    async with tui_at_break("--break", "step==2") as (app, pilot):
        line = app.query_one("#repl", Input)
        await pilot.press("e", *"model.", "tab")
        await wait_for(pilot, lambda: text_of(app, "#repl-out").startswith("Tab: "), "model's names listed")
        await pilot.press("ctrl+u", *"opt.param_g", "tab")
        await wait_for(pilot, lambda: line.value == "opt.param_groups", f"opt.param_groups (the line: {line.value!r})")
        await wait_for(pilot, lambda: text_of(app, "#repl-out").strip() == "", f"the list gone: {text_of(app, '#repl-out')!r}")
        await pilot.press(*"[0].", "tab")
        await wait_for(pilot, lambda: NOT_AFTER_INDEX[:40] in " ".join(text_of(app, "#repl-out").split()),
                       f"why not: {text_of(app, '#repl-out')!r}")
        assert line.value == "opt.param_groups[0].", line.value
