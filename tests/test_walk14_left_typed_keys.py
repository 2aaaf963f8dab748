"""Keys typed at the terminal before a TUI takes it do not act in it (issue 45, the closing
walk's leftovers: typed while the launcher started the job or relayed its output, without
Enter, they waited in the terminal and the TUI that opened next read them as its keys). A
real terminal (tmux, 80x24): `zq` typed while `stepdbg python` starts the job (the terminal
echoes it: not the TUI's yet); the TUI opens, `?` is pressed: the help comes, no quit dialog
(the `q` drove it before); once the TUI is gone the terminal says what was dropped."""

from __future__ import annotations

import shutil
import time

import pytest
from conftest import FIXTURE, WAIT, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

HELP = "keys   (escape, ? or q closes this"
QUIT = "What happens to the job?"


def first_of(term: Tmux, *texts: str) -> str:
    """The screen once one of `texts` is on it."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if any(t in (s := term.screen()) for t in texts):
            return s
        time.sleep(0.2)
    raise AssertionError(f"none of {texts} appeared; the screen:\n{term.screen()}")


def test_keys_typed_before_the_tui_opens_do_not_drive_it(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"python {FIXTURE} --steps 100000 --sleep 0.05", size=(80, 24))
    try:
        term.keys("z", "q")
        term.wait_screen("zq")  # (echoed by the terminal: typed before the TUI had it)
        term.wait_screen("RUNNING")
        term.keys("?")
        screen = first_of(term, HELP, QUIT)
        assert HELP in screen and QUIT not in screen, screen
        term.keys("Escape", "q")
        term.wait_screen(QUIT)
        term.keys("e")
        term.exit_code()
        assert "stepdbg: 2 keys typed before the TUI opened were dropped" in term.screen(), term.screen()
    finally:
        term.close()
