"""The tenth newcomer walk's 3, 5 and 6 (issue 45): the TUI under Pilot against a real job.

3. The Memory panel's largest tensors, fitted at 160 columns, stayed so when the terminal
   went to 80x24: the header was cut at `dtype    s`, a row at `[` (shape and device out of
   sight). The table is fitted again to its new width.
5. A name the Tensor panel could not open (`1/0`) left `1/0: nothing to show (the notice
   says why)` once its toast had gone: the panel says why itself.
6. While the job runs the Model panel and the Memory panel's largest tensors showed a
   table's header alone, without a word: each says it is read at a pause.

Each failed before its fix."""

from __future__ import annotations

from pathlib import Path

from conftest import wait_for
from test_tui_fixes import real
from textual.widgets import DataTable, Input
from tui_walk import screen_text, settled

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


def words(app) -> str:
    return " ".join(screen_text(app, skip=()).split())


@real
async def test_the_largest_tensors_fit_80_columns_after_the_terminal_narrows(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN, size=(160, 48)) as (app, pilot):
        await pilot.press("5")
        t = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: t.row_count > 0, "the largest tensors")
        await settled(pilot, app)
        await pilot.resize_terminal(80, 24)
        await settled(pilot, app)
        assert t.virtual_size.width <= t.scrollable_content_region.width, (t.virtual_size, t.scrollable_content_region)
        header = next(line for line in screen_text(app, skip=()).splitlines() if " tensor " in line)
        assert "shape" in header and "device" in header, header


@real
async def test_a_name_the_tensor_panel_cannot_open_is_said_in_the_panel_after_its_toast(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await pilot.press("3")
        await settled(pilot, app)
        app.query_one("#tensor-name", Input).value = ""
        await pilot.press(*"-1/0", "enter")  # (a digit to begin a name is a number key: the twentieth walk's 1)
        await settled(pilot, app)
        app.clear_notifications()  # (its toast, if any, gone)
        await settled(pilot, app)
        assert "1/0: evaluating it failed: division by zero" in words(app), words(app)
        assert "the notice says why" not in words(app)


@real
async def test_the_model_and_memory_panels_say_they_are_read_at_a_pause_while_the_job_runs(tui_at_break):
    async with tui_at_break("--break", "step==2", script_args=("--steps", "100000", "--sleep", "0.01")) as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.get("state") == "running", "the job to run")
        await pilot.press("2")
        await settled(pilot, app)
        assert "the modules are read at a pause (p pauses the job)" in words(app), words(app)
        await pilot.press("5")
        await wait_for(pilot, lambda: "memory by category is counted at a pause" in words(app), "the Memory panel")
        assert "largest tensors: listed at a pause (p pauses the job)" in words(app), words(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
        await pilot.press("2")
        await wait_for(pilot, lambda: "read at a pause" not in words(app), "the modules at the pause")
        await pilot.press("c")
        await wait_for(pilot, lambda: app.status.get("state") == "running", "the job to run again")
        await pilot.press("1", "2")
        await settled(pilot, app)
        step = app.query_one("ModelPanel").seen_step
        assert f"as of step {step}, the last pause this panel saw; the modules are read at a pause" in words(app), \
            words(app)
