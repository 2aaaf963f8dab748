"""The console turns a breakpoint off and on (`break off SPEC`, `break on SPEC`), as the TUI's
Breaks panel does with space: the breakpoint is kept, marked off, not checked; on again, it
fires. A sub-command it does not know is one line, not a listing that hides the mistake."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = [pytest.mark.usefixtures("private_runtime_dir")]

DEMO = ROOT / "demos" / "nan_log.py"


def console(lines: list[str]) -> tuple[int, list[str], str]:
    """nan_log (NaN at step 6) with `--break loss>0 --break nan`, paused at step 0's loss>0."""
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "loss>0", "--break", "nan",
                          "--on-break", "pause", sys.executable, str(DEMO), "--bad-step", "6", "--steps", "8"],
                         input="".join(f"{line}\n" for line in lines), capture_output=True, text=True, cwd=ROOT,
                         timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    return run.returncode, run.stderr.split("(stepdbg) ")[1:], run.stderr


def test_break_off_keeps_it_unchecked_and_on_makes_it_fire_again():
    code, said, err = console(["break off loss>0", "break on loss>0", "c", "break off loss>0", "break", "c",
                               "break nope loss>0", "break off grad_norm>1", "break on", "c"])
    assert code == 0, err
    assert said[0].startswith("stepdbg: change: breakpoint disabled: loss>0\n  off  loss>0\n  on   nan\n"), said[0]
    assert said[1].startswith("stepdbg: change: breakpoint enabled: loss>0\n  on   loss>0\n"), said[1]
    assert "break at step 1 (before_backward) [loss>0]" in said[2], said[2]  # on again: it fires
    assert said[4].startswith("  off  loss>0\n  on   nan\n"), said[4]  # kept, marked off
    assert "break at step 6 (before_backward) [nan]" in said[5], said[5]  # off: steps 2-5 not checked
    assert "[loss>0]" not in said[5], said[5]
    assert said[6] == "error: break what? add, rm, on or off SPEC (not 'nope')\n", said[6]
    assert said[7].startswith("error: ") and "grad_norm>1" in said[7] and "Traceback" not in said[7], said[7]
    assert said[8] == "error: break on what? a breakpoint's spec (break on nan)\n", said[8]
