"""A newcomer's first terminal is 80x24: nothing the TUI shows there is cut or squeezed
(Pilot against the fake source; the pictures in test_tui_snapshots show the same)."""

from __future__ import annotations

import pytest
from test_tui_keys import started
from textual.containers import VerticalScroll
from textual.widgets import Checkbox, DataTable, Input, Label, RichLog, Static, TabbedContent

from stepdbg_tui.dialogs import HELP

pytestmark = pytest.mark.timeout(60)


async def test_at_80x24_nothing_is_cut_or_squeezed():
    """The Tensor panel's inputs keep their height after Model → Enter, the help scrolls to
    its last line, the LR dialog's checkbox label and the hints fit."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        hint = app.query_one("#model Label.hint", Label)
        assert hint.region.height >= 2 and hint.region.width <= 80  # wrapped, not cut
        table = app.query_one("#model-table", DataTable)
        table.move_cursor(row=3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.query_one(TabbedContent).active == "tensor"
        for inp in ("#tensor-name", "#tensor-index"):
            assert app.query_one(inp, Input).region.height == 3, inp  # typed text stays visible
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        scroll = app.screen.query_one(VerticalScroll)
        assert scroll.region.width <= 80 and scroll.max_scroll_y > 0
        assert scroll.query_one(Static).size.height == len(HELP.splitlines())  # no line wraps out of its column
        await pilot.press("end")
        await pilot.pause(0.2)
        assert scroll.scroll_y == scroll.max_scroll_y  # the last line of the help can be read
        await pilot.press("escape")
        await pilot.press("l")
        await pilot.pause(0.2)
        box = app.screen.query_one(Checkbox)
        assert box.region.width >= len(str(box.label)) + 4  # the label and its box on one line, uncut
        await pilot.press("escape")
        assert app.query_one("LogPanel RichLog", RichLog).wrap  # long job lines wrap in the Log


async def test_at_80x24_every_panel_shows_its_words_whole():
    """Each panel (1-9) at 80x24 passes the walk's check (e): no word cut at the right edge.
    Found by it: the Memory panel's largest tensors' table was 92 columns wide in 78 (its
    `device` column out of sight); a long name now folds onto a second line of its row."""
    from test_tui_fixes import wait_for
    from tui_walk import cut_words

    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        for key in "123456789":
            await pilot.press(key)
            await pilot.press("escape")  # (3 puts the focus in the Tensor panel's field)
            if key == "5":
                await wait_for(pilot, lambda: app.query_one("#mem-largest", DataTable).row_count > 0, "the table")
            await pilot.pause()
            assert not cut_words(app), (key, cut_words(app))


async def test_at_80x24_the_header_keeps_the_script_whole_beside_a_long_condition():
    """Paused on `expr:step % 5 == 0`, the header at 80 columns names the script whole; the
    clock gives way (then the condition would, which the Break panel says whole). It showed
    `t…` for the script."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        app.status = {**app.status, "paused": {**app.status["paused"], "condition": "expr:step % 5 == 0"}}
        app.refresh_header()
        await pilot.pause()
        from tui_walk import screen_text

        first = screen_text(app).splitlines()[0]
        assert "pid 4242  nan_log.py" in first and first.rstrip().endswith("PAUSED [expr:step % 5 == 0]"), first


async def test_at_80x24_a_repl_answer_stays_with_its_panel_and_an_error_goes_under_the_line():
    """A REPL line's error is said under the line, where its answer goes (a toast covered the
    answers there); the answer goes when another panel is shown (it took 3 lines of every
    panel at 80x24; the line under the panel stays, as before any answer)."""
    from test_tui_fixes import wait_for

    src, app, ctx = await started(size=(80, 24))
    src.snapshots = []  # rewind refuses: no snapshots are kept
    async with ctx as pilot:
        await pilot.press("e", *"rewind", "enter")
        out = app.query_one("#repl-out", Static)
        await wait_for(pilot, lambda: "no snapshots are kept" in str(out.render()), "the answer")
        assert not app._notifications, [n.message for n in app._notifications]
        await pilot.press("escape", "6")
        await wait_for(pilot, lambda: out.region.height == 1 and not str(out.render()), "the answer gone")


async def test_at_80x24_a_long_source_line_wraps_whole(monkeypatch):
    """The Break panel's source at 80x24 with nan_log.py's line 52 (76 characters): it wraps,
    whole (its end, `fused=args.fused)`, was cut at the scrollbar)."""
    import fake_source
    from test_tui_fixes import wait_for
    from tui_walk import cut_words, screen_text

    long = "    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=args.fused)"
    source = fake_source.ANSWERS["source"]

    def with_long_line(src, context):
        answer = source(src, context)
        return {**answer, "lines": [{"line": 47, "text": long}, *answer["lines"]]}

    monkeypatch.setitem(fake_source.ANSWERS, "source", with_long_line)
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await wait_for(pilot, lambda: "AdamW" in screen_text(app), "the source")
        assert not cut_words(app), cut_words(app)
