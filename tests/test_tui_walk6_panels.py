"""The panels after the fifth newcomer walk (issue 45): the Tensor panel's slice and names,
the Breaks panel's box, the Plots after the end. The TUI under Pilot attached to a real job
of its own (conftest's tui_at_break), read where the person reads it; each failed before."""

from __future__ import annotations

from conftest import text_of, wait_for
from test_tui_fixes import no_exception_on_screen, real
from textual.widgets import DataTable, Input
from tui_walk import screen_text, settled


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def open_memory_row(app, pilot, row: int = 0) -> None:
    await pilot.press("escape", "5")
    table = app.query_one("#mem-largest", DataTable)
    await wait_for(pilot, lambda: table.row_count > row, "the largest tensors")
    await settled(pilot, app)
    table.move_cursor(row=row)
    await pilot.press("enter")
    await settled(pilot, app)


@real
async def test_the_tensor_panel_applies_its_slice_and_says_a_name_it_cannot_read_in_words(tui_at_break):
    """The fifth walk's 5 and 7. A slice typed in the slice field, then Enter on a Memory row:
    the values shown were the tensor's start, not the slice's; a slice refused (with none
    taken before) emptied the field. A Memory row's label edited in the name field (a quote
    removed) toasted Python's `unterminated string literal`."""
    async with tui_at_break("--break", "step==1", size=(80, 24)) as (app, pilot):
        index = app.query_one("#tensor-index", Input)
        await pilot.press("3", "tab", *"99,99")  # (3: the name field; Tab: the slice)
        await open_memory_row(app, pilot)
        said = " ".join(screen_text(app, skip=()).split())
        assert "refused: the slice '99,99' does not fit" in said and index.value == "99,99", (index.value, said)
        await pilot.press("escape", "3", "tab")  # (the slice field)
        index.value = ""
        await pilot.press(*"0:4")
        await open_memory_row(app, pilot)
        values = text_of(app, "#tensor-slice")
        assert values.startswith("values: ") and values.count(",") == 3, values
        label = app.query_one("#tensor-name", Input).value
        assert label.endswith("']"), label  # (a row's label: `replay capture: rng['cpu']`)
        await pilot.press("escape", "3")
        app.query_one("#tensor-name", Input).value = label.replace("']", "]")  # a quote removed
        await pilot.press("enter")
        await wait_for(pilot, lambda: "not an expression" in screen_text(app, skip=()), "the words")  # (in the panel)
        await settled(pilot, app)
        said = " ".join(toasts(app)) + screen_text(app, skip=())
        assert "unterminated" not in said and "a quote is left open" in said, said
        no_exception_on_screen(app)


@real
async def test_a_breakpoint_added_twice_is_said_and_the_plots_say_the_job_ended(tui_at_break):
    """The fifth walk's 14 and 11. `nan` added in the Breaks box where it was set already
    said nothing; after the job's end the Plots (6) looked as while it ran: they say it ended
    and that what they show is its record to its end."""
    async with tui_at_break("--break", "step==1", "--break", "nan", script_args=("--steps", "5")) as (app, pilot):
        await pilot.press("b", *"nan", "enter")
        await settled(pilot, app)
        table = app.query_one("#breaks-table", DataTable)
        assert table.row_count == 2, table.row_count
        said = " ".join(screen_text(app, skip=()).split())
        assert "nan is there already: not added again" in said, said
        assert app.query_one("#break-input", Input).value == "" and app.focused.id == "break-input"
        await pilot.press(*"x")  # the next typing: the words go, as any word under the box
        await settled(pilot, app)
        assert "there already" not in screen_text(app, skip=())
        await pilot.press("escape", "6", "c")
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        await settled(pilot, app)
        said = " ".join(screen_text(app, skip=()).split())
        assert "the job has ended (exit code 0): the plots are its record to its end, step 4" in said, said
