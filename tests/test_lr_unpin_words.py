"""An LR set without `pin` where one was pinned drops the pin, and says so (the twelfth walk:
the TUI's dialog pins by default, then `lr 0.002` at an attached console said only 'LR set to
0.002 (param group 0, was 0.1)' and the Optim panel's pinned column went to '-')."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = [pytest.mark.usefixtures("private_runtime_dir")]


def test_an_unpinned_lr_over_a_pinned_one_says_the_pin_is_gone():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "step==3", "--on-break", "pause",
                          sys.executable, str(ROOT / "demos" / "lr_explode.py")],
                         input="lr 0.1 pin\nlr 0.002\nlr 0.003\ninfo opt\nc\n", capture_output=True, text=True,
                         cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert run.returncode == 0, run.stderr
    said = run.stderr.split("(stepdbg) ")[1:]
    assert said[0].startswith("stepdbg: change: LR set to 0.1 and pinned (param group 0, was 0.6)\n"), said[0]
    assert said[1].startswith("stepdbg: change: LR set to 0.002 (param group 0, was 0.1); no longer pinned: "
                              "a scheduler may change it (lr 0.002 pin keeps it)\n"), said[1]
    assert said[2].startswith("stepdbg: change: LR set to 0.003 (param group 0, was 0.002)\n"), said[2]  # no pin to drop
    assert "SGD[0]  0.003  -" in said[3], said[3]
