"""Panels a newcomer's walk at 80x24 met (issue 45, items 10-19): each looked at where the
person looks, the TUI under Pilot attached to a real job of its own (conftest's
tui_at_break); each failed before its fix."""

from __future__ import annotations

from conftest import DEMOS, text_of, wait_for
from test_tui_fixes import real
from textual.widgets import DataTable, Input
from tui_walk import screen_text, settled


@real
async def test_a_name_typed_in_the_tensor_panel_replaces_the_one_shown(tui_at_break):
    """3, then a name typed: the field kept `loss` with the cursor at its end, and typing
    `x` asked for `lossx` (item 10). Focused again (escape, 3), the same."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("3")  # (3: the panel, its name field the focus)
        field = app.query_one("#tensor-name", Input)
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        await settled(pilot, app)
        assert app.focused is field
        await pilot.press("x", "enter")
        await settled(pilot, app)
        assert field.value == "x", field.value
        await wait_for(pilot, lambda: text_of(app, "#tensor-summary").startswith("x "), "x's summary")
        await pilot.press("escape", "3", *"loss")
        await settled(pilot, app)
        assert field.value == "loss", field.value



def bars(screen: str) -> list[str]:
    """The rows of a histogram's bars (an empty one draws its baseline: a row of ▁)."""
    return [row for row in screen.splitlines() if row.strip() and set(row.strip()) <= set("▁▂▃▄▅▆▇█ ")]


@real
async def test_the_tensor_panel_shows_only_the_new_answer(tui_at_break):
    """A weight (a histogram and 64 values), then the 0-d loss, a module without parameters,
    a name that is not there: each left the lines of the one before on screen (item 11): an
    empty `histogram` row, its bars' baseline, the weight's values under the new name."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("3")
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        await settled(pilot, app)

        async def ask(name: str) -> str:
            await pilot.press("escape", "3", *name, "enter")
            await wait_for(pilot, lambda: name.split("[")[0] in text_of(app, "#tensor-summary"), name)
            await settled(pilot, app)
            return screen_text(app)

        weight = await ask("model.head[0].weight")
        assert "histogram -" in weight and "values: -" in weight and "▇" in weight, weight
        values = text_of(app, "#tensor-slice").split()[1:4]
        loss = await ask("loss")
        assert "values: nan" in loss and "histogram" not in loss and not bars(loss), loss
        await pilot.press("escape", "2")
        table = app.query_one("#model-table", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, "the modules")
        table.move_cursor(row=[str(k.value) for k in table.rows].index("features"))
        await pilot.press("enter")
        await wait_for(pilot, lambda: "has no parameters" in text_of(app, "#tensor-summary"), "the words")
        await settled(pilot, app)
        module = screen_text(app)
        assert "values:" not in module and "histogram" not in module and not bars(module), module
        await ask("model.head[0].weight")
        missing = await ask("nosuchname")
        assert "nosuchname: no variable nosuchname in this frame" in missing, missing  # (said in the panel)
        assert not any(v in missing for v in values) and "float32 [32, 8]" not in missing, missing


def background(widget) -> set[str]:
    """The background colours `widget` draws its rows in (what its focus mark changes)."""
    from textual.geometry import Region

    strips = widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))
    return {str(seg.style.bgcolor) for strip in strips for seg in strip if seg.style and seg.style.bgcolor}


@real
async def test_the_focus_in_the_break_panel_is_marked(tui_at_break):
    """1 gives the Break panel the focus (Down and PageDown scroll it) with nothing on screen
    to say so (item 12): the panel is drawn lighter, its scrollbar in the accent colour,
    while it has the focus, and not once the focus leaves (e: the REPL line); the
    breakpoints' table (7) likewise, beside its box (b)."""
    from stepdbg_tui.break_panel import BreakPanel

    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        panel = app.query_one(BreakPanel)
        await pilot.press("1")
        await settled(pilot, app)
        assert app.focused is panel
        focused = background(panel)
        await pilot.press("e")
        await settled(pilot, app)
        assert app.focused is app.query_one("#repl") and background(panel) != focused, (background(panel), focused)
        await pilot.press("escape", "7")  # (7: the table has the focus)
        table = app.query_one("#breaks-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, "the breakpoint")
        await settled(pilot, app)
        assert app.focused is table
        focused = background(table)
        await pilot.press("b")
        await settled(pilot, app)
        assert app.focused is app.query_one("#break-input") and background(table) != focused


def frame_rows_with_labels(app) -> list[str]:
    """Rows of the Plots panel's plots where a value's label sits on the frame (its top or
    the x axis's row) instead of beside the plot's own rows."""
    from textual.geometry import Region

    from stepdbg_tui.plots import StepPlot

    out = []
    for plot in app.query(StepPlot):
        rows = [strip.text for strip in plot.render_lines(Region(0, 0, plot.size.width, plot.size.height))]
        out += [f"{plot.id}: {row}" for row in rows if ("└" in row or "┌" in row) and row.split("└")[0].split("┌")[0].strip()]
    return out


@real
async def test_a_log_plots_labels_sit_beside_it_and_the_break_stays_marked_after_the_end(tui_at_break):
    """lr_explode (--lr 0.1) paused at step 40, Plots (6): the loss, 25.2 … 12834, is drawn on
    a log scale; its lowest label (10) sat on the x axis's row and its highest (1e5) on the
    frame's top (item 14); c, the job runs to its end, 6: the break at step 40 was no longer
    marked (the status has no pause after the end)."""
    async with tui_at_break("--break", "step==40", script=DEMOS / "lr_explode.py",
                            script_args=("--lr", "0.1")) as (app, pilot):
        await pilot.press("6")
        await wait_for(pilot, lambda: "break at step 40" in text_of(app, "#plot-loss-label"), "the plots")
        await settled(pilot, app)
        assert "log scale" in text_of(app, "#plot-loss-label"), text_of(app, "#plot-loss-label")
        assert not frame_rows_with_labels(app), frame_rows_with_labels(app)
        await pilot.press("c")
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        await pilot.press("1", "6")
        await wait_for(pilot, lambda: "steps 0–95" in text_of(app, "#plot-loss-label"), "the whole run")
        await settled(pilot, app)
        assert "break at step 40 (red line)" in text_of(app, "#plot-loss-label"), text_of(app, "#plot-loss-label")
        assert "break" in screen_text(app).split("loss:", 1)[1], screen_text(app)


def words(app) -> str:
    """The screen's words, its lines joined (a sentence wraps at 80 columns), the focus's bar left out."""
    return " ".join(screen_text(app).replace("▌", " ").split())


RAISES = "expr: 1/((step-3)*(step-5)) > 100"  # ZeroDivisionError at steps 3 and 5


def test_an_expression_that_raises_is_said_once_on_the_console(tmp_path):
    """stepdbg --no-tui with an expr: breakpoint that divides by zero at steps 3 and 5: the
    job ran to its end and nothing said why the breakpoint never held (item 15). Now one
    line says what went wrong, in words (not `ZeroDivisionError (float division by zero)`:
    the third walk's item 4), at which step and values, and that the breakpoint stays on."""
    from conftest import FIXTURE, run_stepdbg

    run = run_stepdbg(tmp_path, "--no-tui", "--break", RAISES, script_args=(str(FIXTURE), "--steps", "8"))
    assert run.returncode == 0, run.stderr
    said = [line for line in run.stderr.splitlines() if "its expression raised" in line]
    assert len(said) == 1, run.stderr
    assert (f"breakpoint '{RAISES}' at step 3: its expression raised a division by zero "
            "with step=3; it did not break there, and it stays on") in said[0], said
    assert [e["rule"] for e in run.of("finding")] == ["breakpoint_raised"]


@real
async def test_an_expression_that_raises_is_said_in_the_log_and_the_break_panel(tui_at_break):
    """The same breakpoint in the TUI, from a pause at step 1, c: the Log (9) and the Break
    panel (running) said nothing of it."""
    async with tui_at_break("--break", "step==1", "--break", RAISES,
                            script_args=("--steps", "2000", "--sleep", "0.01")) as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: "its expression raised" in words(app), "the finding")
        said = words(app)
        assert f"finding [breakpoint_raised] breakpoint '{RAISES}' at step 3: its expression raised " \
               "a division by zero" in said, said
        await pilot.press("9")
        await settled(pilot, app)
        log = words(app)
        assert f"finding [breakpoint_raised]: breakpoint '{RAISES}' at step 3: its expression raised" in log, log


def column_cells(screen: str, header: str, after: str) -> list[list[str]]:
    """The cells of a table's column `header` (up to column `after`) as drawn: each cell's
    lines, a cell starting on a row whose first column is filled."""
    rows = screen.splitlines()
    top = next(i for i, row in enumerate(rows) if f" {header} " in row and f" {after} " in row)
    left, right = rows[top].index(f" {header} ") + 1, rows[top].index(f" {after} ") + 1
    cells: list[list[str]] = []
    for row in rows[top + 1:]:
        if not row[:left].strip() and not row[left:right].strip():
            break  # (the table's end)
        if row[:left].strip():
            cells.append([])
        if cells:
            cells[-1].append(row[left:right].strip())
    return cells


@real
async def test_the_memory_panels_names_break_between_words_at_80_columns(tui_at_break):
    """nan_log at its break, 5 at 80x24: the largest tensors' names were cut inside a word,
    'opt.state[head.0.wei' over 'ght].exp_avg_sq' (item 16); each line of a name now ends
    where a word does (after a dot, a bracket, a space), or in an ellipsis."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("5")
        table = app.query_one("#mem-largest", DataTable)
        await wait_for(pilot, lambda: table.row_count > 0, "the largest tensors")
        names = [str(k.value) for k in table.rows]
        seen: list[list[str]] = []
        for _ in range(table.row_count + 10):  # down the panel, every row in view once
            await settled(pilot, app)
            screen = screen_text(app)
            if " tensor " in screen:
                seen += [c for c in column_cells(screen, "tensor", "category") if c not in seen]
            if table.cursor_row == table.row_count - 1:
                break
            await pilot.press("down")
        assert len(seen) >= 6 and any(len(c) > 1 for c in seen), seen
        for lines in seen:  # each line ends where a word does: a break character, or a space in the name
            for line, next_line in zip(lines, lines[1:], strict=False):
                assert line.endswith((".", "[", "]", ",", "/", "…")) or any(
                    f"{line} {next_line}" in n for n in names), (lines, names)


@real
async def test_the_break_panel_shows_the_grad_norm_once_the_backward_has_run(tui_at_break):
    """Paused at step 3, n to after_backward: the Break panel said `grad_norm -` while the
    Model panel showed each module's |g| (item 17). It shows the step's gradient norm there,
    the number the step's own read gives before the update (n once more)."""
    import re

    async with tui_at_break("--break", "step==3", "--break", "nan") as (app, pilot):
        def paused_at() -> str:
            return (app.status.get("paused") or {}).get("phase", "")

        def shown_norm() -> str:
            return re.search(r"grad_norm (\S+)", text_of(app, "#break-record")).group(1)

        await wait_for(pilot, lambda: "grad_norm" in text_of(app, "#break-record"), "the break")
        assert paused_at() == "before_forward" and shown_norm() == "not"  # (not measured yet: before the forward)
        for phase in ("after_forward", "before_backward", "after_backward"):
            if paused_at() != phase:
                await pilot.press("n")
                await wait_for(pilot, lambda p=phase: paused_at() == p, phase)
        await settled(pilot, app)
        at_backward = shown_norm()
        assert at_backward != "-", text_of(app, "#break-record")
        await pilot.press("n")
        await wait_for(pilot, lambda: paused_at() == "before_optimizer_step", "before_optimizer_step")
        await settled(pilot, app)
        assert shown_norm() == at_backward, (shown_norm(), at_backward)


@real
async def test_a_toast_never_covers_the_repl_line_or_its_answer(start_job):
    """At 80x24 a toast (0 in a job of one process) stood over the REPL line's answer and the
    line itself, bottom right, for its seconds (item 18): toasts are shown under the REPL
    line, over the footer (the twelfth walk's 4: under the tabs they covered a table's last
    column); the answer and the line stay whole in sight beside one. (Pilot shows toasts only
    when asked: this is tui_at_break's app with notifications on.)"""
    from textual.widgets._toast import Toast

    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp

    start_job("--break", "step==1").info()
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    try:
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the first pause")
            await pilot.press("e", *'"answer " * 9', "enter")
            await wait_for(pilot, lambda: "answer answer" in text_of(app, "#repl-out"), "the answer")
            await pilot.press("escape", "0")
            await wait_for(pilot, lambda: any("this is one process" in " ".join(str(t.render()).split())
                                              for t in app.screen.query(Toast)), "the toast")  # (its own words:
            # folded where its width puts them, a screen row holds a piece of them)
            await settled(pilot, app)
            screen = screen_text(app, skip=())
            said = " ".join(screen.replace("▌", " ").split())
            assert "answer " * 8 + "answer" in said and "e: Python in the paused frame" in said, screen
            app.exit(None)
    finally:
        await client.close(then="end")


@real
async def test_after_another_clients_interrupt_the_break_panel_says_who_sent_it(tui_at_break):
    """A second client (as `stepdbg attach` in another terminal) sends the job Ctrl-C while
    the TUI shows its pause: at the end the Break panel said `Its output went where it runs
    (started with --forward-output, ...)`: it knew only its own Ctrl-C (item 19)."""
    from stepdbg.client.async_client import AsyncClient

    async with tui_at_break("--break", "step==3", script_args=("--steps", "20")) as (app, pilot):
        await settled(pilot, app)  # (the pause shown whole first)
        other = await AsyncClient.connect()
        try:
            await other.interrupt_job()
            await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
            await settled(pilot, app)
        finally:
            await other.close(then="stay")
        said = words(app)
        assert "--forward-output" not in said, said
        assert ("the job ended (exit code 130) after the Ctrl-C sent by another client (stepdbg attach): its own "
                "Ctrl-C handling ran") in said, said
