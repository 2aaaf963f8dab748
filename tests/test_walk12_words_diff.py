"""`stepdbg diff`'s progress said its wait again in every line (issue 45, the twelfth walk's
5): `A: still running after 2 s: ... (waits for it up to --timeout 3600 s)` every 2 s at a
terminal. The wait is said once, in the first line; the later lines say the progress alone.
The real command's stderr, its job one that never steps; failed before its fix."""

from __future__ import annotations

import pytest
from test_diff import diff, line, ours
from test_diff_stop import all_ended, pids_in

WAITS = "(waits for it up to --timeout 8 s)"


@pytest.mark.slow
def test_the_progress_says_the_wait_once_then_the_progress_alone(short_tmp, tmp_path, monkeypatch):
    monkeypatch.setenv("STEPDBG_DIFF_PROGRESS_EVERY", "1")
    pidfile = tmp_path / "pids"
    stall = line("diff_stall.py", str(pidfile), "sleep")
    r = diff("--timeout", "8", stall, stall, tmp=short_tmp)
    assert r.returncode == 2, r.stderr
    progress = [x for x in r.stderr.splitlines() if x.startswith("A: still running after ")]
    assert len(progress) >= 2, r.stderr  # (a line a second for 8 s: one alone would test nothing)
    assert progress[0].endswith(WAITS), r.stderr
    assert not any(WAITS in x or "waits" in x for x in progress[1:]), r.stderr
    assert all(x.split(": ", 2)[2] for x in progress[1:]), r.stderr  # (the steps recorded so far, still said)
    assert all_ended(pids_in(pidfile, 1))
    assert ours(short_tmp) == []
