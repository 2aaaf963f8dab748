"""The memory census files the whole batch as batch (issue 45, the closing walk of 05:50's 29):
at nan_log's break `x` (the model's input) was under batch and `y` (the loss's target, from
the same get_batch call) under other tensors. The batch is what the model and the loss took.
The console's `info mem` (the Mem panel's rows come from the same census)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = pytest.mark.usefixtures("private_runtime_dir")


def test_x_and_y_from_get_batch_are_both_the_batch():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "pause",
                          sys.executable, str(ROOT / "demos" / "nan_log.py")], input="info mem\nc\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert run.returncode == 0, run.stderr
    said = run.stdout + run.stderr
    kinds = {m.group(1): m.group(2) for m in re.finditer(r"^ +\S+B +([xy]) +(\S+(?: \S+)?) +float32", said, re.M)}
    assert kinds == {"x": "batch", "y": "batch"}, said
