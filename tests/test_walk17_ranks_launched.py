"""The seventeenth walk's 2 and 3 as the walk met them (issue 45): `stepdbg --break nan torchrun
--standalone --nproc_per_node=2 demos/ddp_nan.py` in a real terminal (tmux, 80x24), the TUI
the launcher's, which hears every break and replay as they come (test_walk17_ranks_break_panel:
a TUI attached after them). `r` on rank 0, `t`: rank 1's panel has its break's numbers
(`grad_norm not measured yet (before the backward)`, not the update's `grad_norm nan`) and its
replay; `c`: at the end the panel says the last break with the replay's finding (it said
`(replay the step to name it)`, the `dataset index 201` gone)."""

from __future__ import annotations

import shutil
import time

import pytest
from conftest import DEMOS, WAIT, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def wait_words(term: Tmux, text: str) -> str:
    """The screen's words (Textual's own wrapping undone) once they hold `text`."""
    deadline = time.monotonic() + WAIT
    while text not in (words := " ".join(term.screen().split())):
        assert time.monotonic() < deadline, f"{text!r} never appeared:\n{term.screen()}"
        time.sleep(0.2)
    return words


def test_rank_1s_numbers_and_the_replay_at_the_end_in_the_launchers_tui(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan torchrun --standalone --nproc_per_node=2 "
                f"{DEMOS / 'ddp_nan.py'}", size=(80, 24))
    try:
        wait_words(term, "step 6 · before_optimizer_step · PAUSED")
        term.keys("r")
        wait_words(term, "replay on rank 0: ")
        term.keys("t")
        shown = wait_words(term, "replay on rank 1: the data: xb")
        assert "step 6 · before_backward · [nan]" in shown, term.screen()
        assert "grad_norm not measured yet (before the backward)" in shown and "grad_norm nan" not in shown, \
            term.screen()
        term.keys("c")
        wait_words(term, "closes this window. the last break: step 6")  # (the end's record, being drawn)
        shown = wait_words(term, "dataset index 201")  # (a capture mid-draw had the record's first line alone)
        assert "dataset index 201" in shown and "replay the step to name it" not in shown, term.screen()
        assert "(the replay below names it)" in shown and "replay on rank 1: the data: xb" in shown, term.screen()
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
