"""The eleventh newcomer walk's 1 (issue 45), on `demos/nan_log.py` at its break, the TUI under
Pilot at 80x24 against the real job: keys that reach the REPL line in one burst (one terminal
read: tmux's send-keys, a fast typist, a paste) act in the order typed. Textual typed a letter
when it reached the field but ran the field's own keys (backspace, ctrl+u, enter) only once
they had bubbled up to the app: `xyz`, then `BSpace BSpace BSpace p y Enter` at once ran `xyz`
(a NameError); `p y`, then `BSpace x Enter` ran `p y`; `los` Tab, then `C-u p y Enter` ran
nothing and emptied the field, the Tab list left under it. Each failed before its fix."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import Tmux, wait_for
from test_tui_fixes import real
from test_walk10_tui_fields import at_break
from textual.events import Key
from textual.keys import _character_to_key
from textual.widgets import Input, Static
from tui_walk import plain, settled

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


def burst(app, *keys: str) -> None:
    """`keys` as the terminal's driver sends them in one read: none waits for the one before it
    to be handled (Pilot's press waits). A key of one character is that character typed."""
    for k in keys:
        key = Key(_character_to_key(k), k) if len(k) == 1 else Key(k, "\r" if k == "enter" else None)
        key.set_sender(app)
        app._driver.send_message(key)


async def ran(app, pilot, words: str) -> str:
    out = app.query_one("#repl-out", Static)
    await wait_for(pilot, lambda: words in plain(out), f"{words!r} under the line")
    await settled(pilot, app)
    return plain(out)


@real
async def test_keys_in_one_burst_act_in_the_order_typed(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        repl = app.query_one("#repl", Input)
        await pilot.press("e", *"xyz")
        await settled(pilot, app)
        burst(app, "backspace", "backspace", "backspace", *"p 6*7", "enter")
        said = await ran(app, pilot, "42")
        assert "NameError" not in said and "xyz" not in said and repl.value == "", (said, repl.value)
        await pilot.press(*"p 6*7")
        await settled(pilot, app)
        burst(app, "backspace", "8", "enter")
        said = await ran(app, pilot, "48")
        assert "42" not in said and repl.value == "", (said, repl.value)
        await pilot.press(*"lo", "tab")  # (Tab: locals, loss)
        await settled(pilot, app)
        assert "Tab: " in plain(app.query_one("#repl-out", Static))
        burst(app, "ctrl+u", *"p 5*5", "enter")
        said = await ran(app, pilot, "25")
        assert "Tab: " not in said and repl.value == "", (said, repl.value)
        # Enter, then the next line at once: each runs what it held when its Enter came.
        burst(app, *"p 2*3", "enter", *"p 3*3", "enter")
        said = await ran(app, pilot, "9")
        assert app.repl_history.lines[-2:] == ["p 2*3", "p 3*3"] and repl.value == "", (
            app.repl_history.lines[-2:], said, repl.value)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_keys_in_one_write_act_in_the_order_typed_in_a_real_terminal(tmp_path, private_runtime_dir):
    """As the walk met it: tmux 80x24, each burst one send-keys (one write to the terminal)."""
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} demos/nan_log.py", size=(80, 24))
    try:
        term.wait_screen("PAUSED [nan]")
        term.keys("e")
        term.keys("xyz")
        term.wait_screen("xyz")
        term.keys("BSpace", "BSpace", "BSpace", "p 6*7", "Enter")
        assert "NameError" not in term.wait_screen("not a tensor: 42")
        term.keys("p 6*7")
        term.wait_screen("p 6*7")  # (the line holds it)
        term.keys("BSpace", "8", "Enter")
        term.wait_screen("not a tensor: 48")
        term.keys("lo", "Tab")
        term.wait_screen("Tab: locals, loss")
        term.keys("C-u", "p 5*5", "Enter")
        s = term.wait_screen("not a tensor: 25")
        assert "Tab: locals" not in s, s
    finally:
        term.close()
