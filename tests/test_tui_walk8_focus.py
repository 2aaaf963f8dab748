"""The focus after the eighth newcomer walk (issue 45's invariants: keys typed while a field
has the focus never reach the job, a key outside a field does what the help says, the
focus is always somewhere visible that takes keys). The TUI under Pilot attached to a real
job of its own (conftest's tui_at_break) at 80x24 and 160x48; each failed before its fix."""

from __future__ import annotations

import pytest
from conftest import wait_for
from test_tui_fixes import real
from textual.widgets import Input, TabbedContent
from tui_walk import screen_text, settled

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


@real
@pytest.mark.parametrize("size", SIZES)
async def test_a_number_key_always_switches_panel_and_never_gives_a_field_the_focus(tui_at_break, size):
    """The walk's 1: 7 put the focus in the Breaks add box, so 1 was typed there (`bad
    condition '1'`); 3 then 2 typed 2 into the Tensor name field. Now every number key,
    from every panel, shows its panel with the focus off any field, but 3, whose name field
    takes what is typed after it (the twentieth walk's 1: `loss` typed after 3 opened the LR
    dialog), and there a number key typed first is still a number key; b gives the add box
    the focus, escape then Tab the Tensor name field, and the hints say so."""
    async with tui_at_break("--break", "step==1", size=size) as (app, pilot):
        tabs = app.query_one(TabbedContent)
        for a, b in (("7", "1"), ("3", "2"), ("7", "3"), ("3", "7"), ("5", "9")):
            await pilot.press(a)
            await settled(pilot, app)
            assert tabs.active == {"7": "breakpoints", "3": "tensor", "5": "memory"}[a], (a, tabs.active)
            assert isinstance(app.focused, Input) == (a == "3"), (a, app.focused)  # (3: its name field)
            await pilot.press(b)
            await settled(pilot, app)
            assert tabs.active == {"1": "break", "2": "model", "3": "tensor", "7": "breakpoints", "9": "log"}[b]
            assert isinstance(app.focused, Input) == (b == "3"), (a, b, app.focused)
        assert not app.query_one("#break-input", Input).value and app.query_one("#tensor-name", Input).value in (
            "", "loss"), screen_text(app, skip=())
        await pilot.press("7")
        await settled(pilot, app)
        assert "b or Tab: type a spec below" in screen_text(app, skip=())
        await pilot.press("b", "1")
        await settled(pilot, app)
        box = app.query_one("#break-input", Input)
        assert app.focused is box and box.value == "1", (app.focused, box.value)
        await pilot.press("escape", "3", "escape")  # (3: its name field; escape: keys act on the job there)
        await settled(pilot, app)
        assert "Tab: type in the name field" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("tab")
        await settled(pilot, app)
        assert app.focused is app.query_one("#tensor-name", Input), app.focused


def marked(app) -> bool:
    """The focused widget is drawn otherwise than without the focus (a field, or a tint)."""
    w = app.focused
    return isinstance(w, Input) or w is not None and w.styles.background.a > 0


@real
@pytest.mark.parametrize("size", SIZES)
async def test_every_tab_stop_of_the_memory_panel_shows(tui_at_break, size):
    """The walk's 2: in the Memory panel (5), Tab went to the REPL line, a second Tab to the
    panel itself with no mark (arrows then scrolled it), only a third to the table. Every
    stop now shows where the keys are."""
    async with tui_at_break("--break", "step==1", size=size) as (app, pilot):
        await pilot.press("5")
        await settled(pilot, app)
        table = app.query_one("#mem-largest")
        went = []
        for _ in range(4):
            await pilot.press("tab")
            await settled(pilot, app)
            went.append(app.focused)
            assert marked(app), (went, app.focused.styles.background)
            if app.focused is app.query_one("#repl"):  # (its Tab completes, the focus stays: the tenth
                await pilot.press("escape")  # walk's 1; escape leaves it, for the panel)
                await settled(pilot, app)
                went.append(app.focused)
        assert table in went, went


@real
@pytest.mark.parametrize("size", SIZES)
async def test_the_breaks_note_goes_when_the_list_changes(tui_at_break, size):
    """The walk's 4: `nan` added where it was set already said `nan is there already: not
    added again`; after Delete removed it from the table, the note stayed under the box."""
    async with tui_at_break("--break", "step==1", "--break", "nan", size=size) as (app, pilot):
        await pilot.press("b", *"nan", "enter")
        await settled(pilot, app)
        table = app.query_one("#breaks-table")
        assert table.row_count == 2 and "nan is there already" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("escape")
        table.move_cursor(row=[str(table.coordinate_to_cell_key((r, 0)).row_key.value)
                               for r in range(table.row_count)].index("nan"))
        await pilot.press("delete")
        await wait_for(pilot, lambda: table.row_count == 1, "nan removed")
        await settled(pilot, app)
        assert "there already" not in screen_text(app, skip=()), screen_text(app, skip=())


def toasts(app) -> str:
    return " ".join(str(n.message) for n in app._notifications)


@real
async def test_the_tensor_panel_says_a_missing_attribute_its_slice_and_which_parameter(tui_at_break):
    """The walk's 3: `model.0.weightn` said `not an expression (it is not written as Python),
    nor the name of a row ...`; the slice field's placeholder `slice: 0, :8` read as the
    slice applied; a slice typed for one tensor stayed applied to the next opened from Mem,
    unsaid; Enter on (root) in Model said `(root) (Sequential): its first parameter`
    without naming it."""
    async with tui_at_break("--break", "step==1", size=(80, 24)) as (app, pilot):
        await pilot.press("3", "tab")
        await settled(pilot, app)
        assert "slice, e.g. 0, :8" in screen_text(app, skip=()), screen_text(app, skip=())
        app.query_one("#tensor-name", Input).value = "model.0.weightn"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "model.0 has no attribute weightn" in screen_text(app, skip=()), "the words")
        assert "not an expression" not in screen_text(app, skip=()), screen_text(app, skip=())  # (in the panel)
        app.query_one("#tensor-index", Input).value = "0:2"
        await pilot.press("escape", "5")
        table = app.query_one("#mem-largest")
        await wait_for(pilot, lambda: table.row_count > 0, "the largest tensors")
        await pilot.press("enter")
        await settled(pilot, app)
        await wait_for(pilot, lambda: "at the slice 0:2 typed in the slice field" in screen_text(app, skip=()),
                       "the slice said")
        await pilot.press("2")
        model = app.query_one("#model-table")
        await wait_for(pilot, lambda: model.row_count > 0, "the modules")
        app.query_one("#tensor-index", Input).value = ""
        model.move_cursor(row=0)
        await pilot.press("enter")
        await wait_for(pilot, lambda: "(root) (Sequential): its first parameter model.0.weight" in " ".join(
            screen_text(app, skip=()).split()), "its name")


@real
async def test_the_log_uses_its_whole_width_for_lines_written_before_it_was_shown(tui_at_break):
    """The walk's 5: at 160x48 the Log wrapped its lines at about 80 columns (lines written
    before it was first shown kept an early width). A line of 140 characters written then
    is one row of the Log once 9 shows it."""
    async with tui_at_break("--break", "step==1", size=(160, 48)) as (app, pilot):
        line = " ".join(f"w{i:02d}" for i in range(35))  # 139 characters
        app.log_line(line)
        await settled(pilot, app)
        await pilot.press("9")
        await settled(pilot, app)
        rows = screen_text(app, skip=()).splitlines()
        assert any(line in r for r in rows), "\n".join(rows)
