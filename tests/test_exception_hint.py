"""Found running pytorch/examples' word_language_model under `stepdbg --no-tui` with a
huge --lr: its own logging (`math.exp(cur_loss)`) raised OverflowError after an update,
and stepdbg, at that exception break, said 'the job goes on: report is the default
action ...' while the script was ending with the traceback right under that line."""

from __future__ import annotations

import sys

from conftest import ROOT, WAIT, run_stepdbg

HINT = "the job goes on: report is the default action"


def test_an_exception_break_does_not_say_the_job_goes_on(tmp_path):
    run = run_stepdbg(tmp_path, "--no-tui",
                      script_args=(str(ROOT / "tests" / "fixtures" / "raises_after_update.py"),))
    assert run.returncode == 1, run.stderr  # the script's own exit code: it ended
    assert "OverflowError: math range error" in run.stderr, run.stderr
    assert "[exception]" in run.stderr, run.stderr
    assert HINT not in run.stderr, run.stderr


def test_the_fixture_ends_with_the_exception_without_stepdbg():
    import subprocess

    out = subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "raises_after_update.py")],
                         capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
    assert out.returncode == 1 and "OverflowError" in out.stderr, out.stderr
