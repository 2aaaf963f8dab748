"""`stepdbg attach --repl` at 80 columns (issue 45, the third walk's item 18), in a real
terminal (tmux) attached to a real job: the terminal's own wrap broke numbers in two at the
80th column; the console now folds its lines between words."""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_the_repl_never_breaks_a_number_across_lines_at_80_columns(tmp_path, private_runtime_dir, start_job):
    """A list of 40 numbers as the answer to a line: every number on the screen's rows (as
    drawn, not joined) is whole, and none of the rows is over 80 columns."""
    start_job("--break", "step==3", script_args=("--steps", "6")).info()
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(80, 24), env=f"XDG_STATE_HOME={tmp_path}")
    try:
        term.wait_screen("paused at step 3")
        term.keys("[1.23456789] * 40", "Enter")
        # The answer's end and the prompt after it (the typed line holds "1.23456789]" too): a
        # screen read once its first row came could hold the rest only in part
        term.wait_screen("1.23456789]\n(stepdbg)")
        rows = term._tmux("capture-pane", "-p", "-t", term.name).splitlines()  # (not joined: as drawn)
        numbers = [n for row in rows if "1.23" in row and "*" not in row for n in re.findall(r"[\d.]+", row)]
        assert numbers and set(numbers) == {"1.23456789"}, "\n".join(rows)
        assert len(numbers) == 40, "\n".join(rows)
        term.keys("detach", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()


def test_the_banner_says_that_q_ends_the_job_folded_at_80_columns(tmp_path, private_runtime_dir, start_job):
    """The sixteenth walk's 7: `q` at `attach --repl` ended the job at once, and the banner said only
    `h for help, detach or Ctrl-D to leave`. It says what q does, folded between words (as drawn)."""
    start_job("--break", "step==3", script_args=("--steps", "6")).info()
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(80, 24), env=f"XDG_STATE_HOME={tmp_path}")
    try:
        term.wait_screen("paused at step 3")
        rows = term._tmux("capture-pane", "-p", "-t", term.name).splitlines()  # (not joined: as drawn)
        banner = " ".join(r.strip() for r in rows[:4] if r.strip())
        assert "detach or Ctrl-D to leave (the job stays as it is), q ends the job" in banner, "\n".join(rows)
        drawn = {w for r in rows for w in r.split()}  # every word of it whole on a row (none broken by the wrap)
        assert set("h for help, detach or Ctrl-D to leave (the job stays as it is), q ends the job".split()) <= drawn, \
            "\n".join(rows)
        term.keys("detach", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
