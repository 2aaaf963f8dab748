"""The console's prompt (`stepdbg attach --repl`) completes an attribute after a dot
(issue 45, the closing walk's leftovers: it completed the paused frame's names only, so
`opt.param_g<Tab>` did nothing), as the TUI's REPL line does (bd1c890: the job reads the
attributes through the eval request, tui/repl_complete.py, the one place). A real job at a
pause, the console in a real terminal (tmux), the prompt's row as drawn is read."""

from __future__ import annotations

import shutil

import pytest
from conftest import Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_tab_after_a_dot_completes_an_attribute_at_the_console(tmp_path, private_runtime_dir, start_job):
    start_job("--break", "step==3", script_args=("--steps", "6")).info()
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(80, 24), env=f"XDG_STATE_HOME={tmp_path}")
    try:
        term.wait_screen("# @forward")  # (the pause's source, said after its line: typed before it, the
        term.keys("opt.param_g", "Tab")  # listing came between the line typed and its answer)
        term.wait_screen("(stepdbg) opt.param_groups")
        term.keys(" and 1", "Enter")  # (the line completed is the line run)
        term.wait_screen("opt.param_groups and 1\n1\n")
        term.keys("nosuch.x", "Tab")
        term.wait_screen("Tab: no nosuch in the paused frame")
        term.keys("C-u", "detach", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
