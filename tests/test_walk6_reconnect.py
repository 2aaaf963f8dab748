"""Ctrl+R after the job was killed (issue 45, the fifth walk's item 9), in a real terminal
(tmux) running `stepdbg attach` on a real served job: the TUI says the job is gone, not
`reconnect failed: no stepdbg session is running here` (a reconnect looked for whichever
session was running, and found none)."""

from __future__ import annotations

import os
import shutil
import signal

import pytest
from conftest import Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_ctrl_r_after_a_kill_9_says_the_job_is_gone(tmp_path, private_runtime_dir, start_job):
    job = start_job("--break", "step==2", script_args=("--steps", "5"))
    pid = job.info().pid
    term = Tmux(tmp_path, private_runtime_dir, "attach", size=(160, 48))
    try:
        term.wait_screen("paused")
        os.kill(pid, signal.SIGKILL)
        job.proc.wait()
        term.wait_screen("connection lost")  # (the header: the toast says what now, 2cc3534)
        term.keys("C-r")
        screen = term.wait_screen(f"the job (pid {pid}) is gone")
        assert "no stepdbg session is running" not in screen, screen
    finally:
        term.close()
