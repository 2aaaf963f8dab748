"""The locals say a small tensor's values (issue 45, the closing walk of 05:50's 13): at
nan_log's break the console's `locals` (and the Break panel's, from the same rows) said
`loss  Tensor  float32 [] on cpu`, nothing saying the loss was nan; `p loss` said it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = pytest.mark.usefixtures("private_runtime_dir")


def test_the_consoles_locals_say_the_nan_loss_at_the_break():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "pause",
                          sys.executable, str(ROOT / "demos" / "nan_log.py")], input="locals\nc\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert run.returncode == 0, run.stderr
    said = run.stdout + run.stderr
    row = re.search(r"^ +loss +Tensor +(.*)$", said, re.M)
    assert row, said
    assert row.group(1) == "float32 [] on cpu = nan", said
