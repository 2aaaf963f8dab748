"""Issue 45's leftovers of the eleventh walk's 1, on `demos/nan_log.py` at its break, the TUI
under Pilot at 80x24 against the real job, keys sent as the terminal's driver sends them in
one read (none waits for the one before): every key a text field acts on acts in the order
typed. Up and Down (the REPL line's history) and Escape went through the app after the letters
of the same read: `Up BSpace 8 Enter` ran `8`, then recalled the line; `Escape 5` typed `5`
into the line, then left it; at a terminal `Escape l` in one write (alt+l) typed `l`. A key that takes the focus out of a field (escape, Tab) had the
keys typed after it typed into that field (`loss Tab 0 Enter` in the Tensor panel: a name
`loss0`); the Tensor panel's Enter opened what its field held when the app came to it
(`step Enter 9`: `step9`). The LR dialog's field was a plain Input: `0.001 BSpace 2 Enter` set 0.001. Each
failed before its fix."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import Tmux, wait_for
from test_tui_fixes import real
from test_walk10_tui_fields import at_break, job_where
from test_walk11_tui_keys_order import burst, ran
from textual.events import Key
from textual.widgets import Input, Static, TabbedContent
from tui_walk import plain, screen_text, settled

from stepdbg_tui.dialogs import LrScreen

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


@real
async def test_history_and_escape_act_in_the_order_typed(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        repl = app.query_one("#repl", Input)
        await pilot.press("e", *"p 6*7", "enter")
        await ran(app, pilot, "42")
        burst(app, "up", "backspace", "8", "enter")  # the line before, its 7 made an 8, run
        said = await ran(app, pilot, "48")
        assert repl.value == "" and app.repl_history.lines[-1] == "p 6*8", (said, repl.value, app.repl_history.lines)
        burst(app, "up", "up", "down", "enter")  # (back two, forward one: the newest)
        await ran(app, pilot, "48")
        assert app.repl_history.lines[-1] == "p 6*8" and repl.value == "", (app.repl_history.lines, repl.value)
        before = await job_where(app)
        burst(app, *"p 1", "escape", "5")  # out of the line, then 5: the Memory panel, its keys keys
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "memory", "the Memory panel")
        await settled(pilot, app)
        assert repl.value == "p 1" and not isinstance(app.focused, Input), (repl.value, app.focused)
        # Escape and a key in one read are that key with alt to a terminal app (`\x1b9`: alt+9; tmux
        # sends so an Escape typed within its escape-time of the next key): alt+9 typed 9 in the line.
        await pilot.press("e")
        await settled(pilot, app)
        key = Key("alt+9", "9")
        key.set_sender(app)
        app._driver.send_message(key)
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "log", "the Log panel")
        await settled(pilot, app)
        assert repl.value == "p 1" and not isinstance(app.focused, Input), (repl.value, app.focused)
        assert await job_where(app) == before


@real
async def test_keys_typed_after_a_tab_between_fields_go_to_the_next_field(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        before = await job_where(app)
        await pilot.press("3")  # (3: the panel, its name field the focus)
        await settled(pilot, app)
        burst(app, *"loss", "tab", *"sn", "backspace", "backspace", "0", "shift+tab", "enter")
        await settled(pilot, app)
        name, index = app.query_one("#tensor-name", Input), app.query_one("#tensor-index", Input)
        assert (name.value, index.value, app.focused) == ("loss", "0", name), (name.value, index.value, app.focused)
        # Enter opens what the field held when it came, not the letters typed after it in the burst.
        burst(app, "ctrl+u", *"step", "enter", "9")
        await settled(pilot, app)
        said = plain(app.query_one("#tensor-summary", Static))
        assert name.value == "step9" and "step" in said and "step9" not in said, (name.value, said)
        assert await job_where(app) == before


@real
async def test_the_lr_dialog_takes_a_burst_in_the_order_typed(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LrScreen), "the LR dialog")
        await settled(pilot, app)
        burst(app, *"0.001", "backspace", "2", "enter")
        await wait_for(pilot, lambda: (app.status.get("paused") or {}).get("lr_now"), "the job's LR change")
        await settled(pilot, app)
        assert app.status["paused"]["lr_now"]["lr"] == pytest.approx(0.002), app.status["paused"]["lr_now"]
        assert "LR set to 0.002 and pinned" in screen_text(app), screen_text(app)  # (the Break panel's LR line)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_history_and_escape_in_one_write_act_in_the_order_typed_in_a_real_terminal(tmp_path, private_runtime_dir):
    """As a terminal sends it: tmux 80x24, each burst one send-keys (one write)."""
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} demos/nan_log.py", size=(80, 24))
    try:
        term.wait_screen("PAUSED [nan]")
        term.keys("e")
        term.keys("p 6*7", "Enter")
        term.wait_screen("not a tensor: 42")
        term.keys("Up", "BSpace", "8", "Enter")
        term.wait_screen("not a tensor: 48")
        term.keys("p 1", "Escape", "l")  # (one write: `\x1bl`, alt+l to the app)
        s = term.wait_screen("learning rate for")
        assert "p 1l" not in s, s
        term.keys("0.001", "BSpace", "2", "Enter")
        s = term.wait_screen("LR set to 0.002")
        assert "LR set to 0.001" not in s, s
    finally:
        term.close()
