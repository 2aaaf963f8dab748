"""The console (`stepdbg --no-tui`) in a real terminal (tmux) on a real job (issue 45, the
fifth walk's items 10 and 15): a breakpoint removed is said in the words the TUI's Log
uses (`breakpoint removed: SPEC`, one place for them: stepdbg.wire.change_text), not the
agent's internal `change: break_remove spec=...`; `until abc` says what `until` takes, not
Python's `invalid literal for int() with base 10`."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import Tmux

from stepdbg.wire.change_text import change_words

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

SPEC = "grad_norm>200"


def test_the_console_says_a_removed_breakpoint_and_a_bad_until_in_words(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --break '{SPEC}' --on-break pause "
                f"{sys.executable} demos/lr_explode.py", size=(160, 48))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("until abc", "Enter")
        screen = term.wait_screen("until N: run to step N")
        assert "invalid literal" not in screen and "int()" not in screen, screen
        term.keys("until 1", "Enter")  # (the sixth walk: `until: ValueError: step 10 is not ahead ...`)
        screen = term.wait_screen("step 1 is not ahead (the job is at step 1)")
        assert "ValueError" not in screen, screen
        term.keys(f"break rm {SPEC}", "Enter")
        words = change_words({"what": "break_remove", "spec": SPEC})
        assert words == f"breakpoint removed: {SPEC}"
        screen = term.wait_screen(f"stepdbg: change: {words}")
        assert "break_remove" not in screen and "spec=" not in screen, screen
        term.keys("c", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
