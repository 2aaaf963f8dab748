"""The Log of a launched job says a Ctrl-C's change before the KeyboardInterrupt it caused
(issue 45, the fifth walk's item 8), in a real terminal (tmux): `stepdbg python
demos/nan_log.py` at its break, ctrl+c then i, the Log (9). The job's lines reach the Log by
its pipes and its events by the socket; the traceback came first now and then. Now the
job's own line of the change marks its place: the lines after it wait in the Log (never the
job) for the change's event."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import DEMOS, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_a_ctrl_c_s_change_comes_before_its_traceback_in_the_log(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} {DEMOS / 'nan_log.py'}", size=(160, 48))
    try:
        term.wait_screen("PAUSED")
        term.keys("C-c")
        term.wait_screen("interrupt the job")
        term.keys("i")
        term.wait_screen("exit code 130")
        term.keys("9")
        screen = term.wait_screen("KeyboardInterrupt")
        rows = [r.strip() for r in screen.splitlines()]
        change = next(i for i, r in enumerate(rows) if r.startswith("change at step 30:"))
        trace = next(i for i, r in enumerate(rows) if r.startswith("Traceback (most recent call last)"))
        assert change < trace, screen
    finally:
        term.close()
