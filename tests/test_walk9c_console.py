"""The console in a real terminal (tmux) on a real job (issue 45, a newcomer's walk of the
console): what the person reads is right, in order, and said once.

- `stepdbg attach --repl`, the job killed with kill -9: it said `the job ended (the
  connection to the job closed)`, as if the job had ended; now one line says the job is
  gone (its pid, no exit code), and the REPL exits 1.
- `break add SPEC` at the console printed only the list of breakpoints over attach (in the
  job's own console, a second add said nothing); now the change's words come first, as the
  TUI's Log says them (`breakpoint added: SPEC`), or that it was there already.
- The TUI's Ctrl-C then i: the job's stderr said the interrupt twice in two wordings
  (`Ctrl-C from a front end: SIGINT to the job ...`, then `change: interrupt SIGINT sent
  ...`); now once, in the Log's words, before the traceback the Ctrl-C ends the job with.
Each test waits for a screen, never for a time."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import FIXTURE, Tmux

from stepdbg.client.commands import added_words
from stepdbg.wire.change_text import change_words

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

SPEC = "grad_norm>10"


def test_attach_repl_says_a_job_killed_with_kill_9_is_gone_in_one_line(tmp_path, private_runtime_dir, start_job):
    job = start_job("--break", "step==3", script_args=("--steps", "6"))
    info = job.info()
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(120, 30), env=f"XDG_STATE_HOME={tmp_path}")
    try:
        term.wait_screen("paused at step 3")
        job.proc.kill()
        job.proc.wait()
        gone = f"stepdbg: the connection to the job closed; the job (pid {info.pid}) is gone, its exit code unknown"
        term.wait_screen(gone)
        assert term.exit_code() == "1", term.screen()
        screen = term.screen()
        assert screen.count("is gone") == 1 and "the job ended" not in screen, screen
        assert "Traceback" not in screen and "Error" not in screen, screen
    finally:
        term.close()


def test_break_add_over_attach_says_what_it_added_then_the_list(tmp_path, private_runtime_dir, start_job):
    start_job("--break", "step==3", script_args=("--steps", "6")).info()
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(120, 40), env=f"XDG_STATE_HOME={tmp_path}")
    try:
        term.wait_screen("paused at step 3")
        term.keys(f"break add {SPEC}", "Enter")
        added = change_words({"what": "break_add", "spec": SPEC})
        assert added == f"breakpoint added: {SPEC}"
        screen = term.wait_screen(f"  {SPEC}\n")
        said = screen.index(added)
        assert said < screen.index("  step==3\n", said) < screen.index(f"  {SPEC}\n", said), screen
        term.keys(f"break add {SPEC}", "Enter")
        term.wait_screen(f"{SPEC} is there already: not added again")
        assert term.screen().count(added) == 1, term.screen()
        term.keys(f"break rm {SPEC}", "Enter")
        term.wait_screen(f"breakpoint removed: {SPEC}")
        term.keys("detach", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()


def test_break_add_at_the_jobs_own_console_says_it_once_and_a_second_add_in_words(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --break step==3 --on-break pause {sys.executable} "
                f"{FIXTURE} --steps 6", size=(120, 40))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys(f"break add {SPEC}", "Enter")
        screen = term.wait_screen(f"  {SPEC}\n")
        assert screen.count(f"breakpoint added: {SPEC}") == 1, screen  # (the job's own line: stepdbg: change: ...)
        term.keys(f"break add {SPEC}", "Enter")
        screen = term.wait_screen(added_words(SPEC, [SPEC]))
        assert screen.count(f"breakpoint added: {SPEC}") == 1, screen
        term.keys("c", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()


def test_ctrl_c_then_i_in_the_tui_is_said_once_before_the_traceback(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==3 {sys.executable} {FIXTURE} --steps 100000 "
                "--sleep 0.05", size=(160, 40))
    try:
        term.wait_screen("PAUSED")
        term.keys("C-c")
        term.wait_screen("i: interrupt the job")
        term.keys("i")
        term.wait_screen("exit code 130")
        term.keys("q")  # the window of an ended job closes; the job's stderr is on the terminal
        assert term.exit_code() == "130", term.screen()
        screen = term.wait_screen("KeyboardInterrupt")
        said = "stepdbg: change: " + change_words({"what": "interrupt", "by": "a front end", "signal": "SIGINT"})
        assert said in screen and screen.count("sent to the job") == 1, screen
        assert "Ctrl-C from a front end" not in screen, screen
        assert screen.index(said) < screen.index("Traceback (most recent call last)"), screen
    finally:
        term.close()
