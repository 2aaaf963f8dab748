"""The twentieth newcomer walk's TUI items (issue 45), as the walk met them: the TUI under
Pilot at 80x24, attached to a real job of its own (conftest's tui_at_break). Each failed
before its fix.

1. `3`, then `loss` typed: the panel had the focus, where keys act on the job, so `l`
   opened the LR dialog with `oss` typed into it (a name with n, s, c, k, r or p steps,
   continues, skips or replays the job). Now `3` puts the focus in the name field, as `b`
   does the Breaks box; a digit typed first there is still a number key (no name begins
   with one: `3` then `2` shows the Model panel, the eighth walk's 1); escape: keys again.
2. `e`, `list(range(200))`: the answer under the line showed `…` and its last rows, and
   the rest was nowhere. Now the whole answer (as the job sent it: a list's repr stops at
   100 items, `99, ...]`) is in the Log, and the cut says so.
3. After `until N` typed on the REPL line with the Break panel shown, the pause's words
   said `(1 shows the break)`; `h` (the console's help word) did nothing."""

from __future__ import annotations

from conftest import DEMOS, text_of, wait_for
from test_tui_fixes import real
from test_tui_walk2_log import log_words
from textual.widgets import Input, TabbedContent
from tui_walk import screen_text, settled


def words(app) -> str:
    return " ".join(screen_text(app, skip=()).split())


@real
async def test_3_then_a_name_types_the_name_and_never_drives_the_job(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        await pilot.press("3")
        await wait_for(pilot, lambda: "loss" in text_of(app, "#tensor-summary"), "the loss")
        await pilot.press(*"loss", "enter")
        await settled(pilot, app)
        name = app.query_one("#tensor-name", Input)
        assert len(app.screen_stack) == 1 and "learning rate for" not in words(app), words(app)  # no LR dialog
        assert app.focused is name and name.value == "loss", (app.focused, name.value)
        assert app.status["state"] == "paused" and app.status["paused"]["step"] == step, app.status
        assert "escape: keys again" in words(app), words(app)  # (the hint under the field, and the footer)
        await pilot.press("escape")
        await settled(pilot, app)
        assert "keys act on the job here (n steps it)" in words(app), words(app)
        tabs = app.query_one(TabbedContent)
        for a, b, shown in (("3", "2", "model"), ("3", "3", "tensor"), ("3", "7", "breakpoints")):
            await pilot.press(a, b)  # a digit first in the name field: a number key (browsing the panels)
            await settled(pilot, app)
            assert tabs.active == shown and not (b != "3" and isinstance(app.focused, Input)), (a, b, app.focused)
        assert name.value == "loss", name.value
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: "closes this" in words(app), "the help")
        assert "3 Tensor: typing goes to its name field" in words(app), words(app)


@real
async def test_a_long_answer_is_whole_in_the_log(tui_at_break):
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        await pilot.press("e", *"list(range(200))", "enter")
        await wait_for(pilot, lambda: "99, ...]" in text_of(app, "#repl-out"), "the answer")
        await settled(pilot, app)
        out = " ".join(text_of(app, "#repl-out").split())
        assert "… (the whole answer: the Log, 9)" in out, out
        assert "[0, 1, 2," not in out, out  # (cut: its start is in the Log)
        await pilot.press("escape", "9")
        await settled(pilot, app)
        log = log_words(app)
        assert "» list(range(200))" in log and "[0, 1, 2, 3, 4," in log and "98, 99, ...]" in log, log
        await pilot.press("e", *"1+1", "enter")  # a short answer: whole under the line, not in the Log
        await wait_for(pilot, lambda: "2" in text_of(app, "#repl-out").split("\n")[1:], "the answer")
        await settled(pilot, app)
        assert "» 1+1" not in log_words(app), log_words(app)


@real
async def test_h_opens_the_help_as_the_consoles_h(tui_at_break):
    async with tui_at_break("--break", "step==1", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press("h")
        await wait_for(pilot, lambda: "closes this" in words(app), "the help (h)")
        await pilot.press("h")  # (closes it, as ? does)
        await wait_for(pilot, lambda: "closes this" not in words(app), "the help closed")


@real
async def test_until_typed_on_the_break_panel_does_not_say_1_shows_the_break(tui_at_break):
    async with tui_at_break("--break", "step==1", script_args=("--steps", "20")) as (app, pilot):
        await pilot.press("1", "e", *"until 3", "enter")
        await wait_for(pilot, lambda: "the job paused at step 3" in text_of(app, "#repl-out"), "the pause at 3")
        out = " ".join(text_of(app, "#repl-out").split())
        assert "escape, then c continues" in out and "1 shows the break" not in out, out
        await pilot.press("escape", "9", "e", *"until 5", "enter")  # on another panel the words say 1
        await wait_for(pilot, lambda: "the job paused at step 5" in text_of(app, "#repl-out"), "the pause at 5")
        assert "(1 shows the break)" in text_of(app, "#repl-out"), text_of(app, "#repl-out")
