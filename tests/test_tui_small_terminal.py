"""A newcomer's first terminal is 80x24: nothing the TUI shows there is cut or squeezed
(Pilot against the fake source; the pictures in test_tui_snapshots show the same)."""

from __future__ import annotations

import pytest
from conftest import wait_for
from test_tui_keys import started
from textual.containers import VerticalScroll
from textual.widgets import Checkbox, DataTable, Input, Label, RichLog, Static, TabbedContent

from stepdbg_tui.dialogs import HELP, HelpScreen, LrScreen

pytestmark = pytest.mark.timeout(60)


async def test_at_80x24_nothing_is_cut_or_squeezed():
    """The Tensor panel's inputs keep their height after Model → Enter, the help scrolls to
    its last line, the LR dialog's checkbox label and the hints fit."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        await pilot.press("2")
        hint = app.query_one("#model Label.hint", Label)
        await wait_for(pilot, lambda: hint.region.height > 0, "the Model panel laid out")
        assert hint.region.height >= 2 and hint.region.width <= 80  # wrapped, not cut
        table = app.query_one("#model-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 6, "the model's rows")
        table.move_cursor(row=3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "tensor", "the Tensor panel")
        for inp in ("#tensor-name", "#tensor-index"):  # typed text stays visible
            await wait_for(pilot, lambda inp=inp: app.query_one(inp, Input).region.height == 3, f"{inp} 3 lines high")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        scroll = app.screen.query_one(VerticalScroll)
        await wait_for(pilot, lambda: scroll.max_scroll_y > 0, "the help laid out")
        assert scroll.region.width <= 80
        assert scroll.query_one(Static).size.height == len(HELP.splitlines())  # no line wraps out of its column
        await pilot.press("end")  # the last line of the help can be read
        await wait_for(pilot, lambda: scroll.scroll_y == scroll.max_scroll_y, "the help's end")
        await pilot.press("escape")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LrScreen), "the LR dialog")
        box = app.screen.query_one(Checkbox)
        await wait_for(pilot, lambda: box.region.width > 0, "the dialog laid out")
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
    """Paused on `expr:step % 5 == 0`, the header at 80 columns names the script whole (it
    showed `t…`); the condition gives way by whole words, to `[…]` (the Break panel says it
    whole), before the clock and the pid (the third walk's item 9: they went first)."""
    src, app, ctx = await started(size=(80, 24))
    async with ctx as pilot:
        app.status = {**app.status, "paused": {**app.status["paused"], "condition": "expr:step % 5 == 0"}}
        app.refresh_header()
        await pilot.pause()
        from tui_walk import screen_text

        first = screen_text(app).splitlines()[0]
        # (the clock in its narrow spelling where the header is full: d71c449)
        assert "pid 4242  nan_log.py" in first and ("00:12:34 · " in first or "12m34s · " in first), first
        shown = first[first.index("PAUSED [") + 8:first.rindex("]")]
        assert shown == "…" or "expr:step % 5 == 0".startswith(shown.removesuffix(" …") + " "), first


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


SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]
SCROLLBAR = str.maketrans("", "", "▇▁▔▎▊▌▐█")


def column_words(screen: str, label: str, below: int = 1) -> str:
    """The words drawn in the column headed `label`, its wrapped lines joined (as read)."""
    lines = screen.splitlines()
    head = next(i for i, line in enumerate(lines) if f" {label} " in f"{line} ")
    x = lines[head].index(label)
    return " ".join(" ".join(line[x:].translate(SCROLLBAR).split()) for line in lines[head + below:])


@pytest.mark.parametrize("size", SIZES)
async def test_the_ranks_panel_wraps_its_note_and_says_which_columns_it_left_out(size):
    """The Ranks panel (0) of the fake 4-rank job: each rank's note is on screen whole, in
    words that wrap in its column (it was cut at 80x24: the table was 172 columns wide); at
    80x24 the grad norm and loss columns give way, first to last, and the line under the
    table says so; at 160x48 every column is shown and nothing is said left out."""
    from fake_source import FakeJobSource
    from test_tui_fixes import wait_for
    from textual.widgets import DataTable
    from tui_walk import cut_words, screen_text

    from stepdbg_tui.app import StepdbgApp

    src = FakeJobSource()
    app = StepdbgApp(src, clock=lambda: 1754.0)
    async with app.run_test(size=size) as pilot:
        await pilot.press("0")
        await wait_for(pilot, lambda: app.query_one("#ranks-table", DataTable).row_count == 4, "the ranks")
        await pilot.pause()
        screen = screen_text(app)
        words = " ".join(screen.split())
        notes = [r["note"] for r in await src.rank_table()]
        shown = column_words(screen, "note")
        for note in notes[:3]:  # (at 80x24 the last row's end is below the fold: the table scrolls)
            assert " ".join(note.split()) in shown, (note, screen)
        assert not cut_words(app), cut_words(app)
        lines = screen.splitlines()  # (under the tab bar: who gets commands, then the table's header row)
        assert lines[3].strip() == "stepping and changes go to every rank (o chooses)", screen
        if size == (80, 24):
            assert "left out at this width: loss, grad norm" in words, screen
            assert "phase" in lines[4] and "loss" not in lines[4], screen
        else:
            assert "left out" not in words and all(notes[3] in line for line in lines if "killed by" in line), screen
            assert all(label in lines[4] for label in ("loss", "grad norm", "note")), screen


async def test_the_ranks_panel_refits_when_the_terminal_narrows():
    """Shown at 160x48, then the terminal made 80x24: the table is refitted to the new width
    (the columns left out said), not left 172 columns wide in 80."""
    from fake_source import FakeJobSource
    from test_tui_fixes import wait_for
    from textual.widgets import DataTable
    from tui_walk import cut_words, screen_text

    from stepdbg_tui.app import StepdbgApp

    app = StepdbgApp(FakeJobSource(), clock=lambda: 1754.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("0")
        await wait_for(pilot, lambda: app.query_one("#ranks-table", DataTable).row_count == 4, "the ranks")
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: "left out at this width" in " ".join(screen_text(app).split()), "the refit")
        assert not cut_words(app), cut_words(app)


DDP_MODULES = [  # module_tree of demos/ddp_nan.py's model (DistributedDataParallel over a Sequential)
    {"name": "(root)", "type": "DistributedDataParallel", "depth": 0, "params": 321, "trainable": 321,
     "training": True, "output_shape": [16, 1], "weight_norm": None, "grad_norm": None},
    {"name": "module", "type": "Sequential", "depth": 1, "params": 321, "trainable": 321, "training": True,
     "output_shape": [16, 1], "weight_norm": None, "grad_norm": None},
    {"name": "module.0", "type": "Linear", "depth": 2, "params": 288, "trainable": 288, "training": True,
     "output_shape": [16, 32], "weight_norm": 3.369, "grad_norm": 9.848},
    {"name": "module.1", "type": "ReLU", "depth": 2, "params": 0, "trainable": 0, "training": True,
     "output_shape": [16, 32], "weight_norm": None, "grad_norm": None},
    {"name": "module.2", "type": "Linear", "depth": 2, "params": 33, "trainable": 33, "training": True,
     "output_shape": [16, 1], "weight_norm": 0.6739, "grad_norm": 23.63},
]


@pytest.mark.parametrize("size", SIZES)
async def test_a_ddp_models_table_fits_and_says_which_column_it_left_out(size, monkeypatch):
    """The Model panel (2) of a DDP job: `DistributedDataParallel` is whole and the table no
    wider than the screen (it was 81 columns in 80); at 80x24 the mode column gives way and
    the hint says so; at 160x48 every column is shown."""
    import fake_source
    from test_tui_fixes import wait_for
    from tui_walk import cut_words, screen_text

    monkeypatch.setitem(fake_source.ANSWERS, "module_tree", lambda src: DDP_MODULES)
    src, app, ctx = await started(size=size)
    async with ctx as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: app.query_one("#model-table", DataTable).row_count == 5, "the modules")
        await pilot.pause()
        screen = screen_text(app)
        words = " ".join(screen.split())
        assert "(root) DistributedDataParallel [16, 1] 321" in words, screen
        assert not cut_words(app), cut_words(app)
        head = screen.splitlines()[3]
        assert all(label in head for label in ("module", "type", "out", "params", "|w|", "|g|/|w|")), screen
        if size == (80, 24):
            assert "left out at this width: mode" in words and "mode" not in head, screen
        else:
            assert "left out" not in words and "mode" in head, screen
