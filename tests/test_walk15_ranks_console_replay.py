"""A replay another client ran is said at the console once, and `info status` follows it
(issue 45, the closing walk of 05:50's 7). A single served job paused at a nan break, the
console (`stepdbg attach --repl`, a real terminal: tmux 80x24) and a second client (the TUI's
`r`): the console never said the replay, and `info status` still asked for it (`(replay the
step to name it)`). Now the console prints the replay once, and status says the replay at
this pause names it. (The console's own `r` is said once too: by its answer, not its event.)"""

from __future__ import annotations

import shutil
import time

import pytest
from conftest import WAIT, Tmux

from stepdbg import client

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

ASKED_ELSEWHERE = "(another client asked): "


def wait_count(term: Tmux, text: str, n: int) -> str:
    """The screen once `text` is on it `n` times (a ceiling only a hang reaches)."""
    deadline = time.monotonic() + WAIT
    while (shown := term.screen()).count(text) < n:
        assert time.monotonic() < deadline, f"{text!r} never {n} times:\n{shown}"
        time.sleep(0.2)
    return shown


def test_the_console_says_a_replay_another_client_ran_and_status_follows(tmp_path, private_runtime_dir, start_job):
    start_job("--break", "nan", script_args=("--nan-at", "3")).info()  # (the data holds a nan)
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(80, 24), env=f"XDG_STATE_HOME={tmp_path}")
    other = client.connect()
    try:
        term.wait_screen("paused at step")
        assert "replay the step to name it" in (other.status().get("paused") or {}).get("reason", "")
        step = other.wait_paused(WAIT)["step"]
        said = other.replay()["summary"][:24]  # the TUI's r, in another window
        term.wait_screen(f"replay of step {step} {ASKED_ELSEWHERE}{said}")
        term.keys("info status", "Enter")
        shown = term.wait_screen("(the replay at this pause names it)")
        assert "replay the step to name it" not in shown.rpartition("info status")[2], shown
        term.keys("r", "Enter")  # the console's own r: said by its answer, its event not again
        wait_count(term, said, 2)
        term.keys("info status", "Enter")
        shown = wait_count(term, "(the replay at this pause names it)", 2)
        assert shown.count(ASKED_ELSEWHERE) == 1 and shown.count(said) == 2, shown
        term.keys("detach", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        other.close()
        term.close()
