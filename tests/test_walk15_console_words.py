"""The console and the command line say what they do (issue 45, the closing walk of 05:50):
`--help` said the default action at a break was 'report, or pause for serve' (the TUI at a
terminal pauses); the prompt offered 'Enter: until 4' at the pause that until reached (Enter
then failed); Ctrl-D at the console let the job go on in silence."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT, Tmux

pytestmark = [pytest.mark.usefixtures("private_runtime_dir")]

LR_EXPLODE = ("--break", "grad_norm>200", "--on-break", "pause", sys.executable, str(ROOT / "demos" / "lr_explode.py"))


def test_help_says_a_break_pauses_while_a_front_end_is_attached():
    out = subprocess.run([sys.executable, "-m", "stepdbg", "--help"], capture_output=True, text=True, cwd=ROOT,
                         timeout=WAIT, env={**os.environ, "COLUMNS": "80"})
    said = " ".join(out.stdout.split())
    assert "default: pause while a front end is attached: the TUI at a terminal, a `stepdbg attach`; else report" \
        in said, out.stdout


def test_the_prompt_offers_no_enter_that_cannot_run():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", *LR_EXPLODE], input="until 4\n\nc\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT,
                         env={**os.environ, "STEPDBG_CONSOLE": "1"})
    prompts = [ln for ln in run.stderr.splitlines() if ln.startswith("stepdbg paused;")]
    assert prompts[0] == "stepdbg paused; Enter: c, h for help", run.stderr  # at grad_norm>200's break
    assert prompts[1] == "stepdbg paused; h for help", run.stderr  # at step 4, which until 4 reached
    assert "Enter repeats the last stepping command, `until 4`, which cannot run now" in run.stderr, run.stderr


def test_ctrl_d_at_the_console_says_the_job_goes_on(tmp_path, private_runtime_dir):
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    args = " ".join(["--no-tui", "--break", "'grad_norm>200'", "--on-break", "pause", sys.executable,
                     str(ROOT / "demos" / "lr_explode.py")])
    term = Tmux(tmp_path, private_runtime_dir, args, size=(80, 30), env="STEPDBG_CONSOLE=1")
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("C-d")
        screen = term.wait_screen("Ctrl-D: the job goes on, as c (q ends it)")
        assert term.exit_code() == "0", screen
    finally:
        term.close()
