"""`stepdbg doctor` and `stepdbg overfit` as a person reads them at 80 columns (issue 45, the
last newcomer walk's words 3 and 9), real runs:

- the doctor's break line said `(replay the step to name it)` while the doctor replays the
  step itself, on the next line: a break whose actions replay says the replay follows;
- the doctor's summary padded each line of a finding with spaces to the 80th column;
- `stepdbg overfit` said its verdict twice (the job's stderr line, then the summary's box)
  and named the 100th step `(step 100)` of a run of steps 0 to 99.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import DEMOS, FIXTURE, ROOT, WAIT

pytestmark = pytest.mark.slow  # doctor and overfit runs


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stepdbg", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=WAIT, stdin=subprocess.DEVNULL, env={**os.environ, "COLUMNS": "80"})


def test_the_doctors_break_line_says_its_replay_follows_and_its_summary_has_no_padding():
    got = run("doctor", "--steps", "6", sys.executable, str(FIXTURE), "--nan-at", "3", "--steps", "6")
    assert got.returncode == 1, got.stderr
    err = got.stderr
    brk = err.index("stepdbg: break at step 3 (before_backward) [nan]: loss is nan; the model's input is already "
                    "non-finite: it came with the data (the replay that follows will name it)")
    assert brk < err.index("stepdbg: replay of step 3: the data: x already holds 1 non-finite value"), err
    assert "replay the step to" not in err and "finding [nonfinite]" not in err, err
    summary = got.stdout[got.stdout.index("stepdbg doctor: 1 finding in 6 steps"):].splitlines()
    assert summary[1] == "error nonfinite (step 3)" and summary[2].startswith("  the replay of step 3: "), summary
    assert [line for line in summary if line != line.rstrip()] == [], summary
    assert max(len(line) for line in summary) <= 80, summary


def test_overfit_says_its_verdict_once_at_the_last_step_it_ran():
    got = run("overfit", "--steps", "30", sys.executable, str(DEMOS / "cannot_overfit.py"))
    assert got.returncode == 1, got.stderr[-2000:]
    both = got.stdout + got.stderr
    assert both.count("cannot fit even one batch") == 1, both
    assert "finding [cannot_overfit]" not in got.stderr, got.stderr
    assert "overfit one batch: error cannot_overfit (step 29)" in got.stdout, got.stdout  # steps 0 to 29
    assert "stepdbg overfit: 1 finding in 30 steps: the one above" in got.stdout, got.stdout


def test_overfit_that_fits_says_so_once():
    got = run("overfit", "--steps", "30", sys.executable, str(DEMOS / "healthy.py"))
    both = " ".join((got.stdout + got.stderr).replace("│", " ").split())
    assert both.count("the loss went from") == 1, both
