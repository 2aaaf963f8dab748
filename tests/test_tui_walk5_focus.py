"""The focus after the fourth newcomer walk (issue 45's invariants (a) and (d)): b gives the
add box the focus (item 3; 7 shows the panel, its table with the focus: the eighth walk's 1), escape leaves the focus on the panel shown and Tab
goes round the panel's widgets and the REPL line, never the tab bar (item 7). The TUI under
Pilot attached to a real job of its own (conftest's tui_at_break); each failed before."""

from __future__ import annotations

from test_tui_fixes import real
from textual.widgets import Input, TabbedContent, Tabs
from tui_walk import focus_is_visible, header_text, screen_text, settled

from stepdbg_tui.panel_table import BY_ID


@real
async def test_b_gives_the_add_box_the_focus_so_a_spec_typed_there_is_no_keys(tui_at_break):
    """The walk's 3: 7 drew the add box without the focus; `rd` typed there replayed the
    step and moved the frame. b gives it the focus (7 the table: the eighth walk's 1)."""
    async with tui_at_break("--break", "step==1") as (app, pilot):
        phase = app.status.get("phase")
        await pilot.press("b", "r", "d")
        await settled(pilot, app)
        box = app.query_one("#break-input", Input)
        assert app.focused is box and box.value == "rd", (app.focused, box.value)
        assert app.replay_result is None and app.query_one(TabbedContent).active == "breakpoints"
        assert app.status.get("phase") == phase, header_text(app)


@real
async def test_escape_leaves_the_focus_on_the_panel_shown_and_tab_skips_the_tab_bar(tui_at_break):
    """The walk's 7: `e` then escape left the focus on no widget (nothing showed where keys
    went), and Tab went by the tab bar."""
    async with tui_at_break("--break", "step==1") as (app, pilot):
        for key in ("1", "3", "6", "9"):  # a panel that scrolls, one of fields, the plots, the Log
            await pilot.press(key, "e", "escape")
            await settled(pilot, app)
            pane = app.query_one(TabbedContent).active_pane
            assert app.focused is not None and pane in app.focused.ancestors_with_self, (key, app.focused)
            assert focus_is_visible(app) and not isinstance(app.focused, Input), (key, app.focused)
        await pilot.press("1")
        went = [app.focused]
        for _ in range(4):
            await pilot.press("tab")
            went.append(app.focused)
        assert not [w for w in went if isinstance(w, Tabs)], went
        assert app.query_one("#repl", Input) in went and app.query_one(BY_ID["break"].cls) in went, went
        assert went[-1] is app.query_one("#repl", Input), went  # (its Tab completes: the tenth walk's 1)


@real
async def test_the_footer_says_the_keys_a_field_takes_at_80x24(tui_at_break):
    """The walk's 15: at 80x24 the footer was blank while the REPL line, the Tensor field or
    the Breaks box had the focus (a field takes the letters: every key of the app left it)."""
    async with tui_at_break("--break", "step==1", size=(80, 24)) as (app, pilot):
        for keys, words in ((("e",), ("run it", "keys again", "complete")),
                            (("escape", "3"), ("show it", "keys again", "the slice")),  # (3: its name field)
                            (("escape", "b"), ("add it", "the table", "next field"))):
            await pilot.press(*keys)
            await settled(pilot, app)
            footer = screen_text(app, skip=()).splitlines()[-1]
            assert isinstance(app.focused, Input) and all(w in footer for w in words), (keys, footer)
            assert "enter" in footer.lower() or "⏎" in footer, footer


@real
async def test_a_refusals_reason_stays_on_screen_when_its_toast_goes(tui_at_break):
    """The walk's 8: a toast carried the only copy of a reason (s after the end: 'the job has
    ended ... nothing to step'), and at 80x24 it covered the fields; once it went, nothing
    said why the key did nothing. A key pressed on a panel is refused in its toast (under the
    REPL line alone the eighteenth walk's newcomer saw nothing); once it goes the header and
    the REPL line's placeholder say the job ended, and the footer no longer offers s."""
    from conftest import wait_for

    async with tui_at_break("--break", "step==1", script_args=("--steps", "3")) as (app, pilot):
        app.action_cont()
        await wait_for(pilot, lambda: str(app.status.get("state")).startswith("exited"), "the end")
        await pilot.press("s")
        await settled(pilot, app)
        said = [str(n.message) for n in app._notifications]
        assert any("the job has ended (exit code 0): nothing to step" in m for m in said), said
        app.clear_notifications()  # (the toast goes)
        await pilot.pause()
        shown = screen_text(app, skip=())
        assert "job ended, exit code 0" in shown.splitlines()[0] and "the job ended (exit code 0)" in shown, shown
        assert " s step " not in shown.splitlines()[-1], shown


@real
async def test_after_enter_on_a_model_row_the_tensor_hint_says_keys_act_until_tab(tui_at_break):
    """The fifth walk's 1: Enter on a Model (or Memory) row showed the Tensor panel with the
    name in its field and the hint 'escape: keys again (here number keys type)', but the
    focus on the panel: `n` typed to edit the name stepped the job. Keys stay keys there (2
    goes back to the Model panel, other tests hold it); the hint says so, and after Tab it
    says what typing does, and typing edits the name."""
    async with tui_at_break("--break", "step==1") as (app, pilot):
        phase = app.status.get("phase")
        await pilot.press("2", "down", "enter")
        await settled(pilot, app)
        field = app.query_one("#tensor-name", Input)
        assert app.query_one(TabbedContent).active == "tensor" and app.focused is not field, app.focused
        assert "keys act on the job here" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("tab")
        await settled(pilot, app)
        assert app.focused is field, app.focused
        assert "here number keys type" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("n", "r")
        await settled(pilot, app)
        assert field.value.endswith("nr") and app.replay_result is None, field.value
        assert app.status.get("phase") == phase, header_text(app)
        await pilot.press("tab")  # (the sixth walk's 11: in the slice field and on the REPL line it said another's)
        await settled(pilot, app)
        assert app.focused is app.query_one("#tensor-index", Input), app.focused
        assert "Tab: the REPL line" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("tab")
        await settled(pilot, app)
        assert app.focused is app.query_one("#repl", Input), app.focused
        assert "typing goes to the line with the focus" in screen_text(app, skip=()), screen_text(app, skip=())
        await pilot.press("escape")
        await settled(pilot, app)
        assert "keys act on the job here" in screen_text(app, skip=()), screen_text(app, skip=())
