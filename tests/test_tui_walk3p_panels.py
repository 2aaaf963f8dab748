"""Panels and plots the third newcomer's walk met (issue 45, items 6-7, 12, 22): the TUI
under Pilot at 80x24, attached to a real job of its own (conftest's tui_at_break); each
failed before its fix."""

from __future__ import annotations

from conftest import DEMOS, text_of, wait_for
from test_tui_fixes import real
from textual.widgets import DataTable
from tui_walk import screen_text, settled


@real
async def test_after_the_end_the_panels_say_they_show_the_last_values(tui_at_break):
    """nan_log at its break: 2, 5, 3, 4 shown, then c to the end with the Optim panel shown:
    the Optim, Tensor and Model panels kept the pause's values and said nothing of the end
    (items 6-7), and Memory (5) too. Each now says the job ended and which step it shows."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        await pilot.press("2")
        await wait_for(pilot, lambda: app.query_one("#model-table", DataTable).row_count > 0, "the modules")
        await pilot.press("5")
        await wait_for(pilot, lambda: app.query_one("#mem-largest", DataTable).row_count > 0, "the largest tensors")
        await pilot.press("3")
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        await pilot.press("escape", "4")
        await wait_for(pilot, lambda: app.query_one("#opt-table", DataTable).row_count > 0, "the groups")
        await settled(pilot, app)
        await pilot.press("c")
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        said = f"the job has ended (exit code 0): this shows step {step}, the last step this panel saw"
        for key in ("4", "3", "2", "5"):
            await pilot.press("escape", key)
            await wait_for(pilot, lambda: said in " ".join(screen_text(app).split()), f"the words of the end ({key})")


def plot_rows(app, key: str) -> str:
    """The rows of one plot as drawn (its value axis, the curve, the break's line and word)."""
    from textual.geometry import Region

    plot = app.query_one(f"#plot-{key}")
    return "\n".join(strip.text for strip in plot.render_lines(Region(0, 0, plot.size.width, plot.size.height)))


@real
async def test_a_pause_asked_for_is_not_drawn_as_a_break_and_the_breaks_word_is_whole(tui_at_break):
    """A break at step 2, c, then p (a pause asked for) many steps later, 6 at 80x24: the
    plots marked the pause's step as the break (item 22); the break's word, right of its
    red line at the left of a long run, ran under the value axis: `1000┤ak⢇` (item 12)."""
    async with tui_at_break("--break", "step==2", script_args=("--steps", "100000", "--sleep", "0.02")) as (
            app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: len(app.history) > 40, "40 steps")
        await pilot.press("p")
        await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
        paused = app.status["paused"]["step"]
        await pilot.press("6")
        await wait_for(pilot, lambda: f"steps 0–{paused - 1}" in text_of(app, "#plot-loss-label"), "the plots")
        await settled(pilot, app)
        caption = text_of(app, "#plot-loss-label")
        assert "break at step 2 (red line)" in caption and f"break at step {paused}" not in caption, caption
        rows = plot_rows(app, "loss")
        assert "break" in rows, rows


@real
async def test_after_an_interrupt_at_a_pause_the_plots_say_the_step_did_not_finish(tui_at_break):
    """nan_log paused at its break (step 30), 6, ctrl+c, i: the job ends inside step 30, the
    header says step 30 and the plots ended at step 29 without a word (item 22). Now the
    plots say the step the job ended in did not finish."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        await pilot.press("6")
        await wait_for(pilot, lambda: f"steps 0–{step - 1}" in text_of(app, "#plot-loss-label"), "the plots")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: "i: interrupt the job" in screen_text(app), "the question")
        await pilot.press("i")
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        said = f"the job ended in step {step}, which did not finish: it has no values here"
        await wait_for(pilot, lambda: said in " ".join(screen_text(app).split()), "the words")
        assert f"steps 0–{step - 1}" in text_of(app, "#plot-loss-label"), text_of(app, "#plot-loss-label")


@real
async def test_a_data_wait_breaks_hint_leads_to_the_loaders_state_in_threads(tui_at_break):
    """slow_loader at a data_wait break (the README's demo): the hint said to look in
    Threads (8), which showed the main thread's stack at the pause and nothing of the
    DataLoader (item 24). Threads now shows its settings and its workers."""
    async with tui_at_break("--break", "data_wait>0.3", script=DEMOS / "slow_loader.py") as (app, pilot):
        await wait_for(pilot, lambda: "Threads (8) shows the DataLoader" in " ".join(screen_text(app).split()),
                       "the hint")
        await pilot.press("8")
        await wait_for(pilot, lambda: "the DataLoader: 2 worker processes" in screen_text(app), "the loader")
        await settled(pilot, app)
        shown = screen_text(app)
        assert "(num_workers=2)" in shown and shown.count("worker pid ") == 2 and "alive" in shown, shown


@real
async def test_locals_on_the_repl_line_shows_them_in_sight(tui_at_break):
    """e, `locals`: the answer said the Break panel shows them, and the Break panel opened at
    its top, the locals below the fold at 80x24 with nothing saying so (item 25). It now
    opens scrolled to them, and says so."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("e", *"locals", "enter")
        await wait_for(pilot, lambda: "scrolled to them" in text_of(app, "#repl-out"), "the answer")
        await settled(pilot, app)
        await wait_for(pilot, lambda: "locals" in screen_text(app) and " model " in screen_text(app), "the locals")
