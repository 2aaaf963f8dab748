"""A torchrun job's break in the TUI, as the ninth newcomer walk met it (issue 45, its 1 to
4): `stepdbg --break nan torchrun --standalone --nproc_per_node=2 demos/ddp_nan.py` in a
real terminal (tmux). Rank 1's batch holds the NaN; every rank pauses at step 6 before the
update; the TUI shows rank 0.

1. Rank 0's Break panel said rank 1's `loss is nan` beside rank 0's own numbers (`loss
   0.1121`): it shows rank 1's numbers now, under rank 1's name.
2, 3. The Log said the one break three or four times: rank 1 where it saw it (before the
   backward), rank 1 again where it paused (`this rank broke: ...`), rank 0's pause for it
   (`paused for rank 1's break ...`). Now once, naming rank 1, then the pause.
4. Ended from the TUI (q, e), torchrun's `Sending process N closing signal SIGTERM`
   warning reached the terminal beside stepdbg's one line for its failure report."""

from __future__ import annotations

import re
import shutil

import pytest
from conftest import DEMOS, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_a_ranks_break_is_said_once_with_the_breaking_ranks_numbers(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan torchrun --standalone --nproc_per_node=2 "
                f"{DEMOS / 'ddp_nan.py'}", size=(160, 48))
    try:
        term.wait_screen("step 6 · before_optimizer_step · PAUSED")
        # Rank 1's numbers at its pause (its grad norm is the update's: after its break's event
        # before the backward, whose grad norm is none yet): every break event of rank 1 has come.
        screen = term.wait_screen("rank 1: loss nan   grad_norm nan")
        assert not re.search(r"^\s*loss \d", screen, re.M), screen  # (rank 0's own, unnamed)
        term.keys("9")
        rows = [r.strip() for r in term.wait_screen("paused at step 6").splitlines()]
        said = [r for r in rows if r.startswith("break at step 6 ")]
        assert len(said) == 1 and said[0].startswith("break at step 6 [nan] on rank 1: loss is nan"), "\n".join(rows)
        assert rows.index(said[0]) < next(i for i, r in enumerate(rows) if r.startswith("paused at step 6")), rows
        # found at the backward's line, paused at the optimizer's: the Log says both (the nineteenth walk)
        assert "paused at step 6 (before_optimizer_step) at ddp_nan.py:46, with every rank" in rows, rows
        assert not [r for r in rows if "this rank broke" in r or "paused for rank" in r], "\n".join(rows)
        term.keys("q")
        term.wait_screen("What happens to the job?")
        term.keys("e")
        assert term.exit_code() == "3", term.screen()
        screen = term.screen()  # the terminal, the TUI gone
        assert "as asked from the TUI" in screen and "closing signal" not in screen, screen
    finally:
        term.close()
