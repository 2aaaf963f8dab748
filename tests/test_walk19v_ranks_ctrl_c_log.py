"""Ctrl-C then i in the launcher's TUI of a torchrun job (issue 45's eighteenth walk, 6): the
ranks end by their KeyboardInterrupt, and torchrun's own failure report (its `failed
(exitcode: -2)` line, its traceback, its table of failures and root cause: dozens of lines)
filled the Log (9) line by line. Now its report is one line that says the ranks ended by the
Ctrl-C; the ranks' own lines stay. `stepdbg --break nan torchrun --standalone --nproc_per_node=2
demos/ddp_nan.py` in a real terminal (tmux, 80x24)."""

from __future__ import annotations

import shutil

import pytest
from conftest import DEMOS, Tmux
from test_walk17_ranks_launched import wait_words

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

TORCHRUNS = ("ChildFailedError", "Root Cause", "exitcode", "error_file", "=====")


def test_ctrl_c_i_under_torchrun_says_the_ranks_ended_in_a_line(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan torchrun --standalone --nproc_per_node=2 "
                f"{DEMOS / 'ddp_nan.py'}", size=(80, 24))
    try:
        wait_words(term, "step 6 · before_optimizer_step · PAUSED")
        term.keys("C-c")
        wait_words(term, "i: interrupt the job")
        term.keys("i")
        wait_words(term, "job ended, exit code 130")
        term.keys("9")
        # torchrun's report comes once its ranks are gone, after or before the job's end
        # record (rank 0's): the Log shows both, in the order they came.
        shown = wait_words(term, "the ranks were ended by the Ctrl-C sent to the job, after their own Ctrl-C handling ran")
        assert "the job ended with exit code 130" in shown, term.screen()
        assert not [w for w in TORCHRUNS if w in shown], term.screen()
        term.keys("q")
        term.exit_code()  # (stepdbg gone: its terminal lines are all out)
        after = term.screen()  # the whole log on the terminal once the TUI is gone: its end
        assert "the ranks were ended by the Ctrl-C sent to the job, after their own" in " ".join(after.split()), after
        assert not [w for w in TORCHRUNS if w in after], after
    finally:
        term.close()
