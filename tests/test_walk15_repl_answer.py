"""The REPL line's answer at 80x24 after the closing walk of issue 45 (its 1, 19): the
TUI under Pilot attached to a real job (demos/nan_log.py), what the screen draws read."""

from __future__ import annotations

from pathlib import Path

from conftest import text_of, wait_for
from test_tui_fixes import real
from tui_walk import screen_text, settled

NAN_LOG = Path(__file__).resolve().parent.parent / "demos" / "nan_log.py"


@real
async def test_an_error_s_last_line_shows_under_the_line_at_80x24(tui_at_break):
    """The closing walk's 1: `model.nosuch` at 80x24 showed the traceback's frames, wrapped,
    and never its `AttributeError: 'Net' object has no attribute 'nosuch'` (the last lines
    were chosen before wrapping, and wrapping pushed the last out)."""
    async with tui_at_break("--break", "step==3", script=NAN_LOG) as (app, pilot):
        await pilot.press("e", *"model.nosuch", "enter")
        await settled(pilot, app)
        assert "AttributeError" in text_of(app, "#repl-out")  # (the answer came)
        drawn = screen_text(app, skip=())
        assert "'Net' object has no attribute 'nosuch'" in " ".join(drawn.split()), drawn
        assert "» model.nosuch" in drawn, drawn


@real
async def test_a_multi_statement_line_echoes_its_last_expression(tui_at_break):
    """The closing walk's 19: `import os; os.getpid()` printed nothing (`os.getpid()` alone
    printed the pid): the last expression of a line is echoed, as pdb and IPython do."""
    async with tui_at_break("--break", "step==3", script=NAN_LOG) as (app, pilot):
        await pilot.press("e", *"import os; os.getpid()", "enter")
        await settled(pilot, app)
        pid = str(app.source.session.get("pid"))
        drawn = screen_text(app, skip=())
        assert pid in drawn.split("» import os; os.getpid()", 1)[-1], drawn


@real
async def test_a_line_that_runs_says_so_until_its_answer(tui_at_break):
    """The closing walk's 18: `import time; time.sleep(30)` showed only its echo for 30 s,
    nothing said it ran; now a mark under the line says so (and how to stop it) until the
    answer takes its place."""
    async with tui_at_break("--break", "step==3", script=NAN_LOG) as (app, pilot):
        await pilot.press("e", *"import time; time.sleep(600)", "enter")
        await wait_for(pilot, lambda: app.evaluating, "the line running")
        await pilot.pause()
        assert "running… (ctrl+c interrupts)" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("ctrl+c")
        await settled(pilot, app)
        drawn = screen_text(app, skip=())
        assert "the line did not finish" in drawn and "running…" not in drawn, drawn
