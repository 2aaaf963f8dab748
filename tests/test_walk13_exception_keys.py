"""At an uncaught exception's pause, n, s and skip are refused in words (issue 45, the
closing walk of 2026-11-27's 3: `n` at shape_error's break ended the job, exit 1, with no
word; `k` said "step 0's update will be skipped", which means nothing there). c lets the
exception go on, as it would plainly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = [pytest.mark.usefixtures("private_runtime_dir")]

REFUSED = ("at an uncaught exception no step or pause point comes next; c lets the exception go on (it ends "
           "the job as it would plainly), q ends the job (exit code 3)")


def test_n_s_and_skip_at_an_exception_are_refused_and_c_lets_it_through():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--on-break", "pause", sys.executable,
                          str(ROOT / "demos" / "shape_error.py")], input="n\ns\nskip\nc\n", capture_output=True,
                         text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    said = run.stderr.split("(stepdbg) ")[1:]
    assert said[0] == f"error: n: {REFUSED}\n", said[0]
    assert said[1] == f"error: s: {REFUSED}\n", said[1]
    assert said[2] == f"error: skip: {REFUSED}\n", said[2]
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in said[3], said[3]  # c: it goes on
    assert run.returncode == 1, run.stderr
