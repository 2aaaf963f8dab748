"""The Log panel as a newcomer's walk at 80x24 met it (issue 45, the second walk's items 2, 9
and 13): a real job, in a real terminal (tmux) or under Pilot; each failed before its fix."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import DEMOS, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def log_lines(screen: str) -> list[str]:
    return [ln.strip() for ln in screen.splitlines()]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_jobs_last_lines_come_before_its_end_in_the_log(tmp_path, private_runtime_dir):
    """`stepdbg --break nan python demos/nan_log.py` at 80x24, c at the pause, the Log (9)
    shown: the job's last line (`done`) and its end summary (`stepdbg: conditions that
    stayed true ...`, written as the job ends) came after `the job ended with exit code 0`
    (the end comes by the socket, the job's output by its pipes, later). Now the end waits
    for the job's output to be read (bounded)."""
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan {sys.executable} {DEMOS / 'nan_log.py'}",
                size=(80, 24))
    try:
        term.wait_screen("PAUSED")
        term.keys("9")
        term.wait_screen("paused at step 30")
        term.keys("c")
        term.wait_screen("job ended, exit code 0")
        term.wait_screen("conditions that stayed true")
        lines = log_lines(term.wait_screen("the job ended with exit code 0"))
        end = lines.index("the job ended with exit code 0")
        assert lines.index("done") < end, lines
        assert next(i for i, ln in enumerate(lines) if "conditions that stayed true" in ln) < end, lines
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
