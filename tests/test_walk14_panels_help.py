"""The help (?) names what the REPL line takes besides Python and reads clean at 80x24
(issue 45, the closing walk's 15): it named none of the line's words (lr, break, until,
rewind, info...), and its Tab line read `in a field, a field`."""

from __future__ import annotations

import re

import pytest
from conftest import wait_for
from fake_source import FakeSource
from tui_walk import screen_text

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.dialogs import HelpScreen
from stepdbg_tui.repl_line import LINE_COMMANDS

pytestmark = pytest.mark.timeout(60)


async def test_the_help_names_the_repl_lines_words_and_reads_clean_at_80x24():
    app = StepdbgApp(FakeSource(paused=True), clock=lambda: 1754.0)
    lines: dict[int, str] = {}  # the help's lines as drawn, by the number its border says
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        while True:
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()
            rows = screen_text(app).splitlines()
            first, last, total = map(int, re.search(r"lines (\d+)–(\d+) of (\d+)", rows[-2]).groups())
            for n, row in zip(range(first, last + 1), rows[2:], strict=False):
                lines[n] = row[1:-1].rstrip(" ▁▂▃▄▅▆▇█")
            if last == total:
                break
            await pilot.press("pagedown")
    assert sorted(lines) == list(range(1, total + 1)), sorted(lines)
    inside = [lines[n] for n in sorted(lines) if lines[n].strip()]
    section = inside[next(i for i, r in enumerate(inside) if r.strip().startswith("the REPL line")):]
    said = set(re.findall(r"[a-z]+", " ".join(r[:26] for r in section[1:])))  # (the words' column)
    assert set(LINE_COMMANDS) - {"where"} <= said, (sorted(set(LINE_COMMANDS) - said), section)
    assert all(w in " ".join(section) for w in ("u [N]", "d [N]", "break rm", "break off", "break on")), section
    tab = next(r for r in inside if r.strip().startswith("Tab "))
    assert "a field, a field" not in tab, tab
    # Every line keeps its column: a heading, or indented under one (a longer line wrapped to the edge).
    cut = [r for r in inside if not r.startswith("    ") and not r.strip().startswith(("keys", "the REPL line"))]
    assert not cut, cut
