"""A torchrun job launched with the TUI and ended by another client (`stepdbg attach --repl`,
then `q`): the TUI's Log showed torchrun's own failure report, its traceback to
`ChildFailedError ... stepdbg.launch.bootstrap FAILED` (the twentieth walk's 2); the Log of a
job ended from the TUI itself has one line for it. Now it has that line here too. tmux, 80x24."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import DEMOS, ROOT, WAIT, Tmux
from test_walk17_ranks_launched import wait_words

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

TORCHRUNS = ("ChildFailedError", "Root Cause", "error_file", "=====", "Traceback")


def test_a_torchrun_job_ended_by_another_client_is_one_line_in_the_log(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan torchrun --standalone --nproc_per_node=2 "
                f"{DEMOS / 'ddp_nan.py'}", size=(80, 24))
    try:
        wait_words(term, "step 6 · before_optimizer_step · PAUSED")
        subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl"], input="q\n", capture_output=True,
                       text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_RUNTIME_DIR": str(private_runtime_dir)})
        wait_words(term, "job ended, exit code 3")
        term.keys("9")
        shown = wait_words(term, "the job ended with exit code 3, as stepdbg ended it (torchrun reports that")
        assert not [w for w in TORCHRUNS if w in shown], term.screen()
    finally:
        term.close()
