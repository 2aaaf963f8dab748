"""`stepdbg doctor` says each finding once while it runs (issue 45, a newcomer's walk of the
demos): a NaN break's finding is what the replay of its step found, and stderr said it
twice, one line under the other: `stepdbg: finding [nonfinite] the replay of step 3: ...
— try: ...` (the finding, told as the replay's event came) and `stepdbg: replay of step 3:
...` with its source line and advice (the replay's own lines). Now the replay's lines say
it; the summary at the end lists it once. A real doctor run of a script whose data holds a
NaN at step 3."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FIXTURE, ROOT, WAIT

pytestmark = pytest.mark.slow  # a doctor run (see pyproject: slow)

FOUND = "the data: x already holds 1 non-finite value, the first at [0, 0]"


def test_a_nan_breaks_finding_is_said_once_on_stderr_and_once_in_the_summary():
    got = subprocess.run([sys.executable, "-m", "stepdbg", "doctor", "--steps", "6", sys.executable, str(FIXTURE),
                          "--nan-at", "3", "--steps", "6"], capture_output=True, text=True, cwd=ROOT, timeout=WAIT,
                         stdin=subprocess.DEVNULL)
    assert got.returncode == 1, got
    assert got.stderr.count(FOUND) == 1 and f"stepdbg: replay of step 3: {FOUND}" in got.stderr, got.stderr
    assert "finding [nonfinite]" not in got.stderr, got.stderr
    # (the advice under it said it again: `data: x holds 1 non-finite value, the first at [0, 0]; find
    # that record ...`, the seventeenth walk's 11)
    assert got.stderr.count("holds 1 non-finite value") == 1 and "data: find the record x came from" in got.stderr, \
        got.stderr
    summary = got.stdout[got.stdout.index("stepdbg doctor: 1 finding in 6 steps"):]
    assert summary.count("error nonfinite (step 3)") == 1 and summary.count("the replay of step 3") == 1, summary
    assert " ".join(summary.split()).count("holds 1 non-finite value") == 1, summary
