"""The closing walk's keys and words in a real terminal (issue 45: 9, 10, 11), tmux at 80x24
running `stepdbg python` on a job: each failed before its fix.

9: Escape and a key in one read outside a field (`Escape q` given to tmux in one go) lost
the key: no quit dialog.
10: at an uncaught exception's pause, `n` (refused) then `q` and `l`: the launcher said
`the job goes on without the TUI` of a job that stayed paused.
11: a job killed under an attach: ctrl+r said `reconnecting…` and tried; the REPL line
still said `e: Python in the paused frame`."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

import pytest
from conftest import ROOT, WAIT, Tmux
from test_walk19_refusal_seen import wait_toast

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]
FIXTURE = ROOT / "tests" / "fixtures" / "train_loop.py"


def test_escape_and_q_in_one_read_outside_a_field_opens_the_quit_dialog(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==2 {sys.executable} {FIXTURE} --steps 5", size=(80, 24))
    try:
        term.wait_screen("PAUSED [step==2]")
        term.keys("Escape", "q")  # (one read: alt+q)
        term.wait_screen("What happens to the job?")
        term.keys("Escape", "e")  # (in the dialog: it closes, then e focuses the REPL line)
        deadline = time.monotonic() + WAIT
        while "What happens to the job?" in term.screen():
            assert time.monotonic() < deadline, term.screen()
            time.sleep(0.2)
        term.keys(*"p 6*7", "Enter")
        term.wait_screen("42")
    finally:
        term.close()


def test_left_paused_after_a_refused_n_the_launcher_says_it_stays_paused(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} {ROOT / 'demos' / 'shape_error.py'}", size=(80, 24))
    try:
        term.wait_screen("PAUSED [exception]")
        term.keys("n")
        term.wait_screen("at an uncaught exception")
        term.keys("q")
        term.wait_screen("What happens to the job?")
        term.keys("l")
        said = " ".join(term.wait_screen("without the TUI").split())
        assert "the job stays paused without the TUI" in said and "goes on" not in said, said
        assert "`stepdbg attach" in said, said
    finally:
        term.close()


def test_a_job_killed_under_attach_ctrl_r_is_not_tried_and_the_repl_line_says_it_is_gone(
        tmp_path, private_runtime_dir, start_job):
    job = start_job("--break", "step==2", script_args=("--steps", "5"))
    pid = job.info().pid
    term = Tmux(tmp_path, private_runtime_dir, "attach", size=(80, 24))
    try:
        term.wait_screen("PAUSED")
        os.kill(pid, signal.SIGKILL)
        job.proc.wait()
        shown = term.wait_screen(f"the job (pid {pid}) is gone: the panels keep its last state")
        assert "Python in the paused frame" not in shown, shown
        term.keys("C-r")
        shown = wait_toast(term, "nothing to reconnect to")  # (a key pressed on a panel: its toast)
        assert "reconnecting" not in shown and "reconnect failed" not in shown, shown
    finally:
        term.close()
