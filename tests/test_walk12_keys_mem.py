"""Issue 45's twelfth walk, 3 (tmux 80x24, `demos/nan_log.py` at its break): `3`, Tab, `loss`,
Enter, then Escape and `5`, Tab...: the Mem table was never reached. Under tmux an Escape typed
within its escape-time (500 ms) of the next key goes out with it as one key, and Textual reads
Escape and a digit as WezTerm's macOS Option+digit (`\\x1b5`: `∞`): the name field took `loss∞`,
and Tab went round the text fields. In a field, that key is Escape, then the digit: the Mem
panel, its table with the focus (Enter opens its row in the Tensor panel). Pilot and tmux (one
write); each failed before its fix."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from conftest import Tmux, wait_for
from test_tui_fixes import real
from test_walk10_tui_fields import at_break, job_where
from test_walk11_tui_keys_order import burst
from textual.events import Key
from textual.widgets import DataTable, Input, TabbedContent
from tui_walk import settled

NAN = Path(__file__).parent.parent / "demos" / "nan_log.py"


@real
async def test_escape_and_a_number_read_as_one_key_leave_the_field_for_that_panel(tui_at_break):
    async with tui_at_break("--break", "nan", script=NAN) as (app, pilot):
        await at_break(app, pilot)
        before = await job_where(app)
        await pilot.press("3")
        await settled(pilot, app)
        burst(app, *"loss", "enter")
        key = Key("infinity", "∞")  # (what Textual makes of `\x1b5`)
        key.set_sender(app)
        app._driver.send_message(key)
        await wait_for(pilot, lambda: app.query_one(TabbedContent).active == "memory", "the Memory panel")
        await settled(pilot, app)
        assert app.query_one("#tensor-name", Input).value == "loss"
        assert app.focused is app.query_one("#mem-largest", DataTable), app.focused
        assert await job_where(app) == before


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_escape_then_5_within_tmux_escape_time_reaches_the_mem_table(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} demos/nan_log.py", size=(80, 24))
    try:
        term.wait_screen("PAUSED [nan]")
        term.keys("3")  # (its name field: the twentieth walk's 1)
        term.wait_screen("Enter: show it")
        term.keys("loss", "Enter", "Escape", "5")  # (one write: `loss\r\x1b5`)
        s = term.wait_screen("largest tensors (Enter opens one")
        assert "∞" not in s, s
        term.keys("Enter")  # the table's first row, in the Tensor panel
        s = term.wait_screen("loss's graph")
        assert "Tensor" in s and "∞" not in s, s
    finally:
        term.close()
