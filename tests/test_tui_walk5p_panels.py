"""The fourth newcomer's walk (issue 45), the panels' items: each looked at where the person
looks, the TUI under Pilot attached to a real job of its own (conftest's tui_at_break);
each failed before its fix."""

from __future__ import annotations

import re

from conftest import text_of, wait_for
from test_tui_fixes import no_exception_on_screen, real
from textual.widgets import DataTable, Input
from tui_walk import EXCEPTION_WORDS, screen_text, settled

from stepdbg.client.info_text import INFO
from stepdbg.client.info_text import num as num4
from stepdbg_tui.plots import num


def summary(app) -> str:
    return " ".join(text_of(app, "#tensor-summary").split())


@real
async def test_enter_on_a_module_puts_its_name_in_the_tensor_field_and_enter_there_opens_it_again(tui_at_break):
    """The walk's 9: Enter on a Model row put `next((model[0]).parameters(), None)` in the
    Tensor field. It shows the name a person types (`model.0`, `model` for the root), and
    Enter in the field opens the same tensor again (the module's first parameter) — or says
    the module has none — with no exception's words."""
    async with tui_at_break("--break", "step==2", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press("2")
        table = app.query_one("#model-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 4, "the modules")
        await settled(pilot, app)
        field = app.query_one("#tensor-name", Input)
        keys = [str(k.value) for k in table.rows]
        for row, typed in (("0", "model.0"), ("(root)", "model"), ("1", "model.1")):
            await pilot.press("2")
            await settled(pilot, app)
            table.focus()
            table.move_cursor(row=keys.index(row))
            await pilot.press("enter")
            await settled(pilot, app)
            assert field.value == typed, field.value
            shown = summary(app)
            field.focus()
            await pilot.press("enter")
            await settled(pilot, app)
            again = summary(app)
            no_exception_on_screen(app)
            if row == "1":  # (a ReLU)
                assert "has no parameters" in shown and "model.1 is a module (ReLU) with no parameters" in again, again
                continue
            weight = "model.0.weight" if typed == "model" else f"{typed}.weight"
            assert f"{weight} ({typed}'s first parameter)" in again, again
            norm = num4((await app.source.summary("model[0].weight"))["norm"])  # the job's own
            assert shown.split(" norm ")[1].split()[0] == again.split(" norm ")[1].split()[0] == norm, (shown, again)


@real
async def test_a_line_that_begins_with_a_command_and_is_not_it_says_what_the_command_takes(tui_at_break):
    """The walk's 12: on the REPL line `info nothing` and `until 3` showed Python's SyntaxError
    traceback. A command's word with what it does not take says what it takes, in words, the
    console's `info` topics among them; `until N` runs to step N as in the console."""
    async with tui_at_break("--break", "step==0", script_args=("--steps", "20")) as (app, pilot):
        said = {}
        await pilot.press("e")  # (the focus stays on the line after each)
        for line in ("info nothing", "until x", "break foo", "rewind abc", "u abc", "c 3", "until"):
            await pilot.press(*line, "enter")
            await settled(pilot, app)
            said[line] = " ".join(text_of(app, "#repl-out").split())
        for line, text in said.items():
            assert EXCEPTION_WORDS.search(text) is None and "not defined" not in text, (line, text)
        topics = said["info nothing"].partition("info what? ")[2].removesuffix(" (not 'nothing')").split(", ")
        assert {*INFO, "breaks", "ranks", "locals"} <= set(topics), said  # (the console's topics, and the line's)
        assert "until N: run to step N" in said["until x"] and "until N: run to step N" in said["until"], said
        assert "break add SPEC, break rm SPEC, break off SPEC or break on SPEC" in said["break foo"], said
        assert "rewind [STEP]" in said["rewind abc"] and app.status.get("step") == 0, said
        assert "u [N]" in said["u abc"] and "key c" in said["c 3"], said
        await pilot.press(*"until 3", "enter")
        await wait_for(pilot, lambda: app.status.get("state") == "paused" and app.status.get("step") == 3,
                       "the pause at step 3")
        # (its answer, 'running to step 3', gives way to the pause it reached, said under the line: a336fbe)
        assert "the job paused at step 3" in text_of(app, "#repl-out"), text_of(app, "#repl-out")


@real
async def test_after_the_end_the_repl_line_says_the_job_ended_not_to_type_python(tui_at_break):
    """The walk's 15: after the job's end the REPL line still read `e: Python in the paused
    frame (...)`. It says the job ended and what still works, whole at 80 columns."""
    async with tui_at_break("--break", "step==0", script_args=("--steps", "3")) as (app, pilot):
        await pilot.press("c")
        await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        await settled(pilot, app)
        screen = screen_text(app)
        assert "Python in the paused frame" not in screen, screen
        assert "the job ended (exit code 0): the panels keep its last state; q closes" in screen, screen


@real
async def test_end_and_home_move_the_breaks_cursor_and_delete_removes_the_row_it_is_on(tui_at_break):
    """The walk's 18: End in the Breaks table left the cursor on the first row, so Delete
    removed `nan`, the first, not the last. End and Home go to the last and the first row,
    and Delete removes the row the cursor is on (the job's own list says which went)."""
    async with tui_at_break("--break", "step==0", "--break", "nan", "--break", "grad_norm>1e9") as (app, pilot):
        await pilot.press("b")
        table = app.query_one("#breaks-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 3, "the breakpoints")
        await pilot.press("escape")
        await settled(pilot, app)
        assert app.focused is table, app.focused
        specs = [r["spec"] for r in await app.source.breakpoints()]
        await pilot.press("end")
        assert table.cursor_row == 2, table.cursor_row
        await pilot.press("delete")
        await wait_for(pilot, lambda: table.row_count == 2, "the row's removal")
        await settled(pilot, app)
        assert [r["spec"] for r in await app.source.breakpoints()] == specs[:2], specs
        await pilot.press("home")
        assert table.cursor_row == 0, table.cursor_row
        await pilot.press("delete")
        await wait_for(pilot, lambda: table.row_count == 1, "the first row's removal")
        await settled(pilot, app)
        assert [r["spec"] for r in await app.source.breakpoints()] == specs[1:2], specs


def thumb_rows(bar) -> tuple[list[int], float]:
    """The rows of a vertical scrollbar's thumb as drawn (its body: the bar's colour, reversed),
    and how much brighter or darker than the track it is drawn (0 to 1)."""
    from textual.color import Color

    rows, contrast = [], 0.0
    cells = [list(strip)[0] for strip in bar.render_lines(bar.region.reset_offset)]
    track = next(Color.from_rich_color(c.style.bgcolor) for c in cells if not c.style.reverse)
    for i, cell in enumerate(cells):
        if cell.style.reverse:
            rows.append(i)
            contrast = abs(Color.from_rich_color(cell.style.color).brightness - track.brightness)
    return rows, contrast


@real
async def test_the_help_scrolled_to_its_end_shows_it_there(tui_at_break):
    """The walk's 19: at 80x24 the help scrolled to its end read as its thumb mid-way (what a
    capture without colours shows is the thumb's top edge, and the thumb was navy on black).
    At the end the thumb is drawn at the bottom in a colour that stands out from its track,
    and the border says the lines shown and that they are the end (at the top: that more follows)."""
    async with tui_at_break("--break", "step==0", size=(80, 24)) as (app, pilot):
        await pilot.press("question_mark")
        await settled(pilot, app)
        scroll = app.screen.query_one("HelpScreen > VerticalScroll")
        bar = scroll.vertical_scrollbar
        rows, contrast = thumb_rows(bar)
        assert rows[0] == 0 and rows[-1] < bar.region.height - 1 and contrast > 0.3, (rows, contrast)
        assert re.search(r"lines 1–\d+ of \d+ · ↓ more", screen_text(app)), screen_text(app)
        await pilot.press("end")
        await settled(pilot, app)
        rows, contrast = thumb_rows(bar)
        assert rows[-1] == bar.region.height - 1 and rows[0] > 0 and contrast > 0.3, (rows, contrast)
        total = scroll.virtual_size.height
        assert re.search(rf"lines \d+–{total} of {total} · the end", screen_text(app)), screen_text(app)
        assert "Breaks its table: space turns one on/off, delete removes)" in screen_text(app, skip=())


LR_CUT = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[3], gamma=0.1)  # 0.1 for steps 0-2, then 0.01
for step in range(8):
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    sched.step()
"""


def data_cells(plot) -> dict[int, set[int]]:
    """The rows (top first) and columns of the braille cells a plot draws its series with
    (not the break's red line, nor the axes' characters), from the picture it renders."""
    from rich.console import Console

    console, cells = Console(), {}
    for y, line in enumerate(plot.render().split("\n")):
        for x, ch in enumerate(line.plain):
            style = line.get_style_at_offset(console, x)
            if "\u2800" < ch <= "\u28ff" and "red" not in str(style.color):
                cells.setdefault(y, set()).add(x)
    return cells


@real
async def test_an_lr_cut_at_one_step_is_drawn_as_a_step_and_its_numbers_are_the_jobs(tui_at_break, tmp_path):
    """The walk's 6: lr_explode's LR, cut at one step, was drawn as a ramp (a line from point
    to point spans the step before the cut). Drawn as a staircase, the drop is one vertical
    line: between the two levels' rows every cell is in one column. The caption's numbers
    are the job's own history's."""
    script = tmp_path / "lr_cut.py"
    script.write_text(LR_CUT)
    async with tui_at_break("--break", "step==6", script=script) as (app, pilot):
        await pilot.press("6")
        await wait_for(pilot, lambda: len(app.history) == 6, "the six steps before the break")
        await settled(pilot, app)
        cells = data_cells(app.query_one("#plot-lr"))
        top, bottom = min(cells), max(cells)
        between = {x for y, xs in cells.items() if top < y < bottom for x in xs}
        assert bottom - top > 2 and len(between) == 1, cells
        history = await app.source.get_history(100)
        lrs = [h["lr"][0] for h in history]
        assert [h["step"] for h in history] == list(range(6)) and lrs[2] == 0.1 and round(lrs[3], 9) == 0.01, history
        caption = text_of(app, "#plot-lr-label")
        assert caption.startswith(f"lr: steps 0–5, {num(min(lrs))} … {num(max(lrs))}, last {num(lrs[-1])}"), caption
