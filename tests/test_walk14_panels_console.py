"""The console's Enter after an `until N` that reached step N says why it cannot run again
(issue 45, the closing walk's 19): Enter repeats the last stepping command (as pdb's), and
said only `error: step 4 is not ahead (the job is at step 4)`, of a command not typed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = pytest.mark.usefixtures("private_runtime_dir")


def test_enter_repeating_an_until_that_was_reached_says_why_it_cannot_run():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "grad_norm>200", "--on-break", "pause",
                          sys.executable, str(ROOT / "demos" / "lr_explode.py")], input="until 4\n\nc\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert run.returncode == 0, run.stderr
    said = run.stderr.split("(stepdbg) ")[2]  # (the answer to the empty line)
    assert said.startswith("error: Enter repeats the last stepping command, `until 4`, which cannot run now: "
                           "step 4 is not ahead (the job is at step 4); c, n, s or until N go on"), said
