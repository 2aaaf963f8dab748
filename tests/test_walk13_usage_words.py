"""A missing argument's example names the command typed (issue 45, the closing walk of
2026-11-27's 13: `stepdbg doctor`, `overfit` and `serve` said "e.g. 'stepdbg python train.py'
(see --help)", the wrong command and help; `stepdbg diff` said "A, B is needed; e.g.
stepdbg diff A, B", read as one argument with a comma)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT


@pytest.mark.parametrize("argv, said", [
    (["diff"], "stepdbg: A and B are needed; e.g. stepdbg diff A B (see stepdbg diff --help)"),
    (["doctor"], "stepdbg: no script to run; e.g. 'stepdbg doctor python train.py' (see stepdbg doctor --help)"),
    (["overfit"], "stepdbg: no script to run; e.g. 'stepdbg overfit python train.py' (see stepdbg overfit --help)"),
    (["serve"], "stepdbg: no script to run; e.g. 'stepdbg serve python train.py' (see stepdbg serve --help)"),
    ([], "stepdbg: no script to run; e.g. 'stepdbg python train.py' (see stepdbg --help)"),
])
def test_a_missing_arguments_example_names_the_command_typed(argv, said):
    r = subprocess.run([sys.executable, "-m", "stepdbg", *argv], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == said, (r.returncode, r.stderr)


def test_doctor_says_how_many_steps_it_ran_without_naming_an_option_not_given():
    """The sixteenth walk's 17: `stepdbg overfit python demos/cannot_overfit.py` said `stopping
    after 100 steps (--steps 100)`, an option nobody gave (its default)."""
    r = subprocess.run([sys.executable, "-m", "stepdbg", "doctor", sys.executable, "tests/fixtures/train_loop.py",
                        "--steps", "50"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "stepdbg: stopping after 20 steps (--steps N sets how many)" in r.stderr, r.stderr
    assert "(--steps 20)" not in r.stderr, r.stderr
