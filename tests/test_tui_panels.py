"""Every panel of the TUI, driven by Pilot against a fake source: what each number key shows
and where the keys go, the panels' own keys (Breaks, Model, Memory), and what fits at 80x24."""

from __future__ import annotations

import pytest
from conftest import text_of, wait_for
from test_tui_keys import started
from textual.widgets import DataTable, RichLog, TabbedContent

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.break_panel import BreakPanel
from stepdbg_tui.plots import PlotsPanel
from stepdbg_tui.threads_panel import ThreadsPanel

pytestmark = pytest.mark.timeout(60)


async def test_number_keys_switch_panels_and_load_them():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        expected = {"2": "module_tree", "3": "summary", "4": "optimizer", "5": "memory", "7": "breakpoints",
                    "8": "stacks"}
        for key, pid in zip("123456789", ("break", "model", "tensor", "optimizer", "memory", "plots",
                                          "breakpoints", "threads", "log"), strict=True):
            await pilot.press(key)
            await wait_for(pilot, lambda pid=pid: app.query_one(TabbedContent).active == pid, f"panel {pid} shown")
            tables = list(app.query_one(f"#{pid}").query(DataTable))
            scrolls = {"break": BreakPanel, "plots": PlotsPanel, "threads": ThreadsPanel, "log": RichLog}
            # (never a field, but the Tensor panel's name: what is typed after 3, the twentieth walk's 1;
            # the next number key, typed first there, switches panel)
            expected_focus = tables[0] if tables else app.query_one(scrolls[pid]) if pid in scrolls else None
            expected_focus = app.query_one("#tensor-name") if pid == "tensor" else expected_focus
            # Down, PageDown, Enter act at once
            await wait_for(pilot, lambda want=expected_focus: app.focused is want, f"the focus on {pid}'s {expected_focus}")
            if key in expected:
                await wait_for(pilot, lambda op=expected[key]: any(c[0] == op for c in src.calls), f"{key}'s load asked")
        await wait_for(pilot, lambda: app.query_one("#model-table", DataTable).row_count == 6, "the model's rows")
        opt = app.query_one("#opt-table", DataTable)
        await wait_for(pilot, lambda: opt.row_count > 0, "the optimizer's rows")
        assert "AdamW[0]" in str(opt.get_row_at(0)[0])


async def test_the_optimizers_hyperparameters_are_whole_at_80_columns():
    """A table cell cut at the edge showed weight_decay=0.01 as weight_decay=0.0."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.press("4")  # (export_screenshot: the SVG of what the terminal shows)
        await wait_for(pilot, lambda: "amsgrad=False" in app.export_screenshot(), "the hyperparameters drawn")
        assert "weight_decay=0.01" in app.export_screenshot()


def test_every_panel_is_declared_once_with_a_key_and_a_load():
    from stepdbg_tui.asking import Loads
    from stepdbg_tui.dialogs import HELP
    from stepdbg_tui.panel_table import PANELS

    keys = [p.key for p in PANELS]
    assert len(set(keys)) == len(keys) and all(len(k) == 1 for k in keys)
    assert all(issubclass(p.cls, Loads) for p in PANELS)
    assert all(f" {p.name}" in HELP for p in PANELS), "the help names every panel"


async def test_the_ranks_key_in_one_process_says_why_it_shows_nothing():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.pause()
        await pilot.press("0")
        await pilot.pause()
        assert app.query_one(TabbedContent).active == "break"
        assert any("distributed job; this is one process" in n.message for n in app._notifications)


async def test_the_break_panel_scrolls_to_the_source_and_locals_at_80x24():
    """At 80x24 the paused line and the locals are below the fold: they scrolled only once
    Tab had found the panel, and nothing said so."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await wait_for(pilot, lambda: "Namespace(steps=60" in text_of(app, "#break-locals"), "the locals loaded")
        await pilot.pause()
        assert "Namespace(steps=60" not in app.export_screenshot().replace("&#160;", " ")
        await pilot.press("end")  # the locals, last on the panel
        await wait_for(pilot, lambda: "Namespace(steps=60" in app.export_screenshot().replace("&#160;", " "),
                       "the locals scrolled into view")


async def test_model_row_opens_its_weight_in_the_tensor_panel():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("2")
        table = app.query_one("#model-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 6, "the model's rows")
        table.focus()
        table.move_cursor(row=3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "tensor", "the Tensor panel")
        await wait_for(pilot, lambda: ("summary", ("model.head.0",)) in src.calls,
                       "the summary asked")  # (the name a person types)


async def test_one_of_the_largest_tensors_opens_in_the_tensor_panel():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("5")
        table = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: table.row_count == 10, "the ten largest tensors")
        table.focus()
        table.move_cursor(row=5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "tensor", "the Tensor panel")
        await wait_for(pilot, lambda: ("summary", ("opt.state[head.0.weight].exp_avg",)) in src.calls, "the summary")


async def test_breakpoints_add_validates_as_you_type_toggle_and_remove():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("b")
        await wait_for(pilot, lambda: getattr(app.focused, "id", None) == "break-input", "the add box's focus")
        await pilot.press(*"los>1")
        await pilot.pause()
        assert "unknown condition 'los'" in text_of(app, "#break-error")
        app.focused.value = ""
        await pilot.press(*"loss>4", "enter")
        await wait_for(pilot, lambda: ("break_add", ("loss>4",)) in src.calls, "break_add sent")
        table = app.query_one("#breaks-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 3, "the added row")
        # added: the focus stays in the box, so the next spec typed is a spec (issue 45: its n stepped
        # the job); escape puts it on the table, where space and delete act
        assert app.focused.id == "break-input"
        await pilot.press("escape")
        assert app.focused is table
        table.move_cursor(row=0)
        await pilot.press("space")
        await wait_for(pilot, lambda: ("break_enable", ("nan", False)) in src.calls, "nan turned off")
        await wait_for(pilot, lambda: str(table.get_row_at(0)[0]) == "○", "nan drawn off")
        table.move_cursor(row=1)
        await pilot.press("space")
        await wait_for(pilot, lambda: str(table.get_row_at(1)[0]) == "○", "grad_norm>100 drawn off")
        assert table.cursor_row == 1  # the cursor stays on the row toggled
        await pilot.press("space", "delete")
        await wait_for(pilot, lambda: ("break_enable", ("grad_norm>100", True)) in src.calls, "grad_norm>100 on")
        await wait_for(pilot, lambda: ("break_remove", ("grad_norm>100",)) in src.calls, "grad_norm>100 removed")
        await wait_for(pilot, lambda: table.row_count == 2, "its row gone")
        await pilot.press("delete", "delete")  # not the add box after (the table keeps it): 1 and c are keys again
        await wait_for(pilot, lambda: table.row_count == 0 and app.focused is table, "every breakpoint removed")
        await pilot.press("1")
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "break", "the Break panel")


def test_plot_scales_and_ticks():
    """Log scale only where a positive series spans two decades; ticks are whole steps on a
    round stride and powers of ten; NaN and missing values are left out of a series."""
    from stepdbg_tui.plots import caption, decade_ticks, log_scale, points, step_ticks

    hist = [{"step": 0, "loss": 2.0}, {"step": 1, "loss": float("nan")}, {"step": 2, "loss": None},
            {"step": 3, "loss": 500.0, "lr": [0.1, 0.2]}]
    assert points(hist, "loss") == ([0, 3], [2.0, 500.0]) and points(hist, "lr") == ([3], [0.1])
    assert log_scale([2.0, 500.0]) and not log_scale([2.0, 150.0]) and not log_scale([0.0, 1e6])
    assert step_ticks(0, 30) == [0, 10, 20, 30] and step_ticks(3, 8) == [3, 4, 5, 6, 7, 8]
    assert step_ticks(7, 1234)[:2] == [250, 500]
    assert decade_ticks(0.05, 2e6) == ([0.1, 10.0, 1000.0, 1e5], ["0.1", "10", "1000", "1e5"])  # within the values
    assert caption("loss", [0, 3], [2.0, 500.0], True, 4) == (
        "loss: steps 0–3, 2 … 500, last 500 · log scale · break at step 4 (red line)")


async def test_a_log_scaled_plot_survives_being_drawn_again():
    """plotext applies a log scale to its stored values while it builds, so the second build
    of one figure (any resize or refresh) took log10 of negative numbers and the exception
    ended the app. Each render now draws from our own data: resizing the Plots panel twice
    leaves the grad norm plot (1e6 at the end: log scale) drawn, with its decade ticks."""
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("6")
        plot = app.query_one("#plot-grad_norm")
        await wait_for(pilot, lambda: plot.draw is not None, "the plots loaded")
        for size in ((100, 40), (130, 44), (120, 40)):
            width = plot.size.width
            await pilot.resize_terminal(*size)
            await wait_for(pilot, lambda width=width: plot.size.width != width, f"the plot drawn at {size}")
        drawn = str(plot.render())
        assert app.is_running and "1e6" in drawn and "could not be drawn" not in drawn
        assert str(plot.render()) == drawn  # a second build is the same picture


async def test_a_jobs_ten_tabs_and_the_rank_question_fit_80_columns():
    """A distributed job at 80x24: 1 Break had scrolled out of the tab bar, and o's question
    was cut at '(e.g. 0,2'."""
    from fake_source import FakeJobSource

    app = StepdbgApp(FakeJobSource(), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "0 Ranks" in app.export_screenshot().replace("&#160;", " "), "the tab bar")
        assert "1 Break" in app.export_screenshot().replace("&#160;", " ")
        await pilot.press("o")
        await wait_for(pilot, lambda: "0,2-3 or all)" in app.export_screenshot().replace("&#160;", " "), "o's question")
