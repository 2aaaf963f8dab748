"""A pause and a resume said where the person looks, after the seventh newcomer walk (issue
45: nothing that matters only in a toast). A break that came while the Tensor panel's name
field or the REPL line had the focus was said in a toast alone, which went; after c or R
the Log said nothing of the job going on, and the Break panel said `no break yet` of a job
that had broken. The TUI under Pilot attached to a real job of its own (conftest's
tui_at_break) at 80x24 and 160x48; each failed before its fix."""

from __future__ import annotations

import pytest
from conftest import wait_for
from test_tui_fixes import real
from textual.widgets import Input, RichLog
from tui_walk import screen_text, settled

from stepdbg.client.async_client import AsyncClient

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


def words(app) -> str:
    return " ".join(screen_text(app, skip=()).split())


def log_text(app) -> str:
    """The Log panel's lines as drawn (once it is shown: its lines wait for its width), as words."""
    return " ".join(" ".join(str(line.text) for line in app.query_one("LogPanel RichLog", RichLog).lines).split())


@real
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize(("keys", "field"), [(("3",), "tensor-name"), (("e",), "repl")], ids=["tensor", "repl"])
async def test_a_break_while_a_field_has_the_focus_is_said_beside_it_and_stays(tui_at_break, size, keys, field):
    """3 and Tab (the Tensor panel's name field) or e (the REPL line), another client continues the
    job, and it breaks at step 6: the focus stays in the field (what is typed next is not
    run as keys), and the pause and why are on screen (not only in a toast, which goes)
    until the job goes on."""
    async with tui_at_break("--break", "step==3", "--break", "step==6", script_args=("--steps", "40"),
                            size=size) as (app, pilot):
        await pilot.press(*keys)
        await settled(pilot, app)
        assert app.focused is app.query_one(f"#{field}", Input), app.focused
        other = await AsyncClient.connect()
        try:
            await other.cont()
            await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status.get("step") == 6,
                           "the break at step 6")
            await settled(pilot, app)
            app.clear_notifications()  # (a toast goes: what stays is what the person reads later)
            await settled(pilot, app)
            shown = words(app)
            assert app.focused is app.query_one(f"#{field}", Input), app.focused
            assert "the job paused at step 6 [step==6]: reached step 6 · escape, then c continues" in shown, shown
            field_row = app.query_one(f"#{field}", Input).region.y  # said near the field
            rows = screen_text(app, skip=()).splitlines()
            near = rows[max(0, field_row - 3):field_row + 6]
            assert any("the job paused at step 6" in r for r in near), "\n".join(rows)
            assert "PAUSED" in rows[0], rows[0]
            await pilot.press("escape", "c")
            await wait_for(pilot, lambda: app.status.get("state") != "paused", "c to continue the job")
            await settled(pilot, app)
            assert "the job paused at step 6" not in words(app), words(app)
        finally:
            await other.close(then="continue")


@real
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("key", ["c", "R"])
async def test_after_c_or_r_the_log_says_the_job_went_on_and_the_break_panel_keeps_the_last_break(
        tui_at_break, size, key):
    """At the break at step 3 (snapshots kept every 2 steps), c or R: the job runs on. The
    Log said nothing of it after c (R: a toast, and its change line), and the Break panel
    said `running — no break yet`. Now the Log says `resumed at step 3 (before_forward)`
    after either key (R's change line before it), and the Break panel says the job runs and
    the last break, `step 3 · before_forward · [step==3] reached step 3`."""
    async with tui_at_break("--keep-every", "2", "--break", "step==3",
                            script_args=("--steps", "400", "--sleep", "0.05"), size=size) as (app, pilot):
        await settled(pilot, app)
        await pilot.press(key)
        await wait_for(pilot, lambda: app.status.get("state") == "running", f"{key} to resume the job")
        await settled(pilot, app)
        shown = words(app)
        assert "no break yet" not in shown, shown
        assert "The last break: step 3 · before_forward · [step==3] reached step 3" in shown, shown
        await pilot.press("9")
        await wait_for(pilot, lambda: "resumed at step 3" in log_text(app), "the Log's line of the resume")
        said = log_text(app)
        assert "resumed at step 3 (before_forward)" in said, said
        if key == "R":
            assert said.index("rewind to the snapshot of step 2") < said.index("resumed at step 3"), said
