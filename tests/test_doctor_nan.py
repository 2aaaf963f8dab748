"""`stepdbg doctor` on a run that goes NaN (issue 44 item 8): the NaN break is a finding,
with what the replay of its step found. A run NaN from its first steps has no finite steps
for the other rules to measure: it said "0 findings ... nothing to report"."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURE, ROOT, WAIT, marked_line

pytestmark = pytest.mark.slow  # doctor runs (see pyproject: slow)


def doctor_json(*args: str) -> tuple[int, dict]:
    got = subprocess.run([sys.executable, "-m", "stepdbg", "doctor", "--json", *args], capture_output=True,
                         text=True, cwd=ROOT, timeout=WAIT, stdin=subprocess.DEVNULL)
    return got.returncode, json.loads(got.stdout)


def test_a_run_nan_at_once_is_a_finding_naming_what_the_replay_found():
    code, out = doctor_json("--steps", "8", sys.executable, str(ROOT / "demos" / "lr_explode.py"), "--lr", "1e12")
    (nan,) = [f for f in out["findings"] if f["rule"] == "nonfinite"]
    assert code == 1 and nan["severity"] == "error", out
    assert nan["message"].startswith(f"the replay of step {nan['step']}: mse_loss (MseLossBackward0)"), nan
    assert "learning rate" in nan["advice"], nan


def test_a_nan_planted_in_the_data_at_step_3_is_a_finding_at_step_3():
    code, out = doctor_json("--steps", "6", sys.executable, str(FIXTURE), "--nan-at", "3", "--steps", "6")
    (nan,) = [f for f in out["findings"] if f["rule"] == "nonfinite"]
    assert (code, nan["step"], nan["data"]["replay"]["first_nonfinite"]["where"]) == (1, 3, "input"), nan


def test_a_script_that_never_reaches_the_agent_is_said_in_one_line(tmp_path):
    """An interpreter that cannot run the job (no torch there) said "0 findings in None steps"."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho 'no torch here' >&2\nexit 2\n")
    python.chmod(0o755)
    got = subprocess.run([sys.executable, "-m", "stepdbg", "doctor", str(python), str(FIXTURE)], capture_output=True,
                         text=True, cwd=ROOT, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert (got.returncode, got.stdout) == (2, "stepdbg doctor: no step was watched (the script exited with 2)\n")
    assert "no torch here" in got.stderr


def test_an_exception_a_nan_caused_is_a_finding_naming_the_nan():
    """pytorch/examples' VAE: a NaN sample reaches binary_cross_entropy, which raises. The
    replay named the sample, but doctor said '0 findings ... nothing to report'."""
    script = ROOT / "tests" / "fixtures" / "vae_shape.py"
    code, out = doctor_json("--steps", "12", sys.executable, str(script))
    (nan,) = [f for f in out["findings"] if f["rule"] == "nonfinite"]
    assert code == 1 and nan["data"]["replay"]["first_nonfinite"]["sample"] == 37, out
    assert nan["message"].endswith("then RuntimeError: all elements of input should be between 0 and 1 "
                                   f"at vae_shape.py:{marked_line(script, 'raises')}"), nan
    assert "find the record" in nan["advice"] and "(dataset index 37)" in nan["advice"], nan
