"""The REPL line's answer after the sixth newcomer walk (issue 45's (e): nothing stale): the
answer area under the line shows the last line's answer, and none of the job's after its
end. The TUI under Pilot attached to a real job of its own (conftest's tui_at_break); it
failed before its fix."""

from __future__ import annotations

from conftest import text_of, wait_for
from test_tui_fixes import real
from tui_walk import settled


@real
async def test_the_answer_under_the_repl_line_is_the_last_line_s_and_goes_at_the_end(tui_at_break):
    """The sixth walk's 5: `skip` Enter, then `info ranks` Enter (a job of one process): the
    area still said `» skip / skip is the console's word…` while a toast answered the second
    line; and the old answer stayed after the job ended."""
    async with tui_at_break("--break", "step==3", script_args=("--steps", "8")) as (app, pilot):
        await pilot.press("e", *"skip", "enter")
        await settled(pilot, app)
        assert "skip is the console's word" in text_of(app, "#repl-out"), text_of(app, "#repl-out")
        await pilot.press(*"info ranks", "enter")
        await settled(pilot, app)
        answer = text_of(app, "#repl-out")
        assert "skip" not in answer and "» info ranks" in answer, answer
        assert "shows the Ranks of a distributed job; this is one process" in answer, answer
        await pilot.press("escape", "c")
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the job's end")
        await settled(pilot, app)
        assert "info ranks" not in text_of(app, "#repl-out"), text_of(app, "#repl-out")
