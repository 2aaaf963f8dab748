"""Under torchrun the Log says every rank's replay, each once, naming its rank (issue 45, the
twelfth walk's 4): r replays on every rank, and each rank sends its own replay, but the Log
said the rank in view's alone (rank 0's `its own step made no non-finite value`), never rank
1's, which names the bad input. In a real terminal (tmux), ddp_nan paused for rank 1's break,
rank 0 in view."""

from __future__ import annotations

import shutil

import pytest
from conftest import DEMOS, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_the_log_says_every_ranks_replay_naming_it(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"torchrun --standalone --nproc_per_node=2 {DEMOS / 'ddp_nan.py'}",
                size=(200, 60))
    try:
        term.wait_screen("step 6 · before_optimizer_step · PAUSED")
        term.keys("r")
        term.wait_screen("replay on rank 0: ")  # (the Break panel's answer: the rank in view's own)
        term.keys("9")
        screen = term.wait_screen("replay of step 6 on rank 1: ")
        rows = [r.strip() for r in screen.splitlines()]
        assert len([r for r in rows if r.startswith("replay of step 6 on rank 1: ")]) == 1, screen
        assert len([r for r in rows if r.startswith("replay of step 6 on rank 0: ")]) == 1, screen
        assert not [r for r in rows if r.startswith("replay of step 6: ")], screen
        term.keys("c")
        term.wait_screen("job ended, exit code 0")
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
