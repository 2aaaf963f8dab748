"""Every panel of the TUI, driven by Pilot against a fake source: what each number key shows
and where the keys go, the panels' own keys (Breaks, Model, Memory), and what fits at 80x24."""

from __future__ import annotations

import pytest
from conftest import text_of
from test_tui_keys import started
from textual.widgets import DataTable, RichLog, TabbedContent

from stepdbg_tui.app import StepdbgApp
from stepdbg_tui.break_panel import BreakPanel
from stepdbg_tui.panels import TensorPanel
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
            await pilot.pause(0.1)
            assert app.query_one(TabbedContent).active == pid
            tables = list(app.query_one(f"#{pid}").query(DataTable))
            scrolls = {"break": BreakPanel, "plots": PlotsPanel, "threads": ThreadsPanel, "log": RichLog,
                       "tensor": TensorPanel}  # (never a field: the next number key switches panel)
            expected_focus = tables[0] if tables else app.query_one(scrolls[pid]) if pid in scrolls else None
            assert app.focused is expected_focus, (key, app.focused)  # Down, PageDown, Enter act at once
            if key in expected:
                assert any(c[0] == expected[key] for c in src.calls), key
        assert app.query_one("#model-table", DataTable).row_count == 6
        assert "AdamW[0]" in str(app.query_one("#opt-table", DataTable).get_row_at(0)[0])


async def test_the_optimizers_hyperparameters_are_whole_at_80_columns():
    """A table cell cut at the edge showed weight_decay=0.01 as weight_decay=0.0."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.press("4")
        await pilot.pause(0.2)
        screen = app.export_screenshot()  # (the SVG of what the terminal shows)
        assert "weight_decay=0.01" in screen and "amsgrad=False" in screen


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
        await pilot.pause(0.3)
        assert "Namespace(steps=60" not in app.export_screenshot().replace("&#160;", " ")
        await pilot.press("end")
        await pilot.pause(0.3)
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "Namespace(steps=60" in screen  # the locals, last on the panel


async def test_model_row_opens_its_weight_in_the_tensor_panel():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        table = app.query_one("#model-table", DataTable)
        table.focus()
        table.move_cursor(row=3)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.query_one(TabbedContent).active == "tensor"
        assert ("summary", ("model.head.0",)) in src.calls  # (the name a person types)


async def test_one_of_the_largest_tensors_opens_in_the_tensor_panel():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("5")
        await pilot.pause(0.3)
        table = app.query_one("#mem-largest", DataTable)
        assert table.row_count == 10
        table.focus()
        table.move_cursor(row=5)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.query_one(TabbedContent).active == "tensor"
        assert ("summary", ("opt.state[head.0.weight].exp_avg",)) in src.calls


async def test_breakpoints_add_validates_as_you_type_toggle_and_remove():
    src, app, ctx = await started()
    async with ctx as pilot:
        await pilot.press("b")
        await pilot.pause(0.2)
        assert app.focused.id == "break-input"
        await pilot.press(*"los>1")
        await pilot.pause()
        assert "unknown condition 'los'" in text_of(app, "#break-error")
        app.focused.value = ""
        await pilot.press(*"loss>4", "enter")
        await pilot.pause(0.2)
        assert ("break_add", ("loss>4",)) in src.calls
        table = app.query_one("#breaks-table", DataTable)
        assert table.row_count == 3
        # added: the focus stays in the box, so the next spec typed is a spec (issue 45: its n stepped
        # the job); escape puts it on the table, where space and delete act
        assert app.focused.id == "break-input"
        await pilot.press("escape")
        assert app.focused is table
        table.move_cursor(row=0)
        await pilot.press("space")
        await pilot.pause(0.2)
        assert ("break_enable", ("nan", False)) in src.calls
        table.move_cursor(row=1)
        await pilot.press("space")
        await pilot.pause(0.2)
        assert table.cursor_row == 1  # the cursor stays on the row toggled
        await pilot.press("space", "delete")
        await pilot.pause(0.2)
        assert ("break_enable", ("grad_norm>100", True)) in src.calls and ("break_remove", ("grad_norm>100",)) in src.calls
        await pilot.press("delete", "delete")
        await pilot.pause(0.3)
        assert table.row_count == 0 and app.focused is None  # not the add box: 1 and c are keys again
        await pilot.press("1")
        await pilot.pause(0.2)
        assert app.query_one(TabbedContent).active == "break"


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
        await pilot.pause(0.3)
        for size in ((100, 40), (130, 44), (120, 40)):
            await pilot.resize_terminal(*size)
            await pilot.pause(0.2)
        plot = app.query_one("#plot-grad_norm")
        drawn = str(plot.render())
        assert app.is_running and "1e6" in drawn and "could not be drawn" not in drawn
        assert str(plot.render()) == drawn  # a second build is the same picture


async def test_a_jobs_ten_tabs_and_the_rank_question_fit_80_columns():
    """A distributed job at 80x24: 1 Break had scrolled out of the tab bar, and o's question
    was cut at '(e.g. 0,2'."""
    from fake_source import FakeJobSource

    app = StepdbgApp(FakeJobSource(), clock=lambda: 1754.0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "1 Break" in screen and "0 Ranks" in screen
        await pilot.press("o")
        await pilot.pause(0.2)
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "0,2-3 or all)" in screen
