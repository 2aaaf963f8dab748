"""`stepdbg diff`'s answer folds between words at an 80-column terminal (issue 45, the closing
walk of 2026-11-27's 7: `the bytes diff` / `er; max |A-B| ...`: the answer on stdout was not
folded; its progress on stderr was). tmux at 80 columns (its capture joins what the terminal
wrapped, so a line over 80 columns is one the terminal broke)."""

from __future__ import annotations

import sys

import pytest
from test_walk12_cli_fold import folded

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_the_diffs_answer_folds_between_words(tmp_path, private_runtime_dir):
    py = sys.executable
    runs = (f"diff --steps 3 '{py} demos/nan_log.py' '{py} demos/nan_log.py --bad-step 1'; echo ALL-DONE")
    screen, said = folded(tmp_path, private_runtime_dir, runs)
    assert "first divergence: step 1, input: batch[0] is the first to differ" in said, screen
