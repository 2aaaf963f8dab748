"""`stepdbg attach --repl` at a terminal is told a replay another client ran before it
attached (issue 45's nineteenth walk, 1): d284758 told the piped console, but the REPL at a
terminal (tui/repl.py, prompt-toolkit) printed the pause's raw reason, `(replay the step to
name it)`, and nothing of the TUI's `r`. Now both say a pause in one place
(replays_heard.pause_words). A served job paused at a nan break, a first client's replay (the
TUI's r), then the REPL in a real terminal (tmux, 80x24): its screen as drawn."""

from __future__ import annotations

import shutil

import pytest
from conftest import WAIT, Tmux

from stepdbg import client

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_the_repl_at_a_terminal_says_a_replay_run_before_it_attached(tmp_path, private_runtime_dir, start_job):
    start_job("--break", "nan", script_args=("--nan-at", "3")).info()
    with client.connect() as first:
        brk = first.wait_paused(WAIT)
        summary = first.replay()["summary"]  # the TUI's r
        term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(80, 24), env=f"XDG_STATE_HOME={tmp_path}")
        try:
            screen = term.wait_screen("(the replay at this pause names it)")
            said = f"replay of step {brk['step']} (another client asked, before you attached): {summary}"
            assert said.replace(" ", "") in screen.replace("\n", "").replace(" ", ""), screen  # (folded at 80)
            assert "replay the step to name it" not in screen, screen
            term.keys("detach", "Enter")
            assert term.exit_code() == "0", term.screen()
        finally:
            term.close()
        first.end()
