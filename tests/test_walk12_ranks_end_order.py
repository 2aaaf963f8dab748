"""A torchrun rank's own lines come before its end summary and before the Log's `[rank 1]
is gone` (issue 45, the twelfth walk's 2): after `c` at ddp_nan's break the Log and the
terminal put rank 0's `step 10 loss`, `step 15 loss` and `rank 0 done` after its
`stepdbg[rank 0]: conditions that stayed true ...` and after `[rank 0] is gone`. torchrun
copies each rank's stdout and stderr from two files by two threads; the launcher held a
rank's stderr for its stdout at an event's line only (not the end summary), and the Log said
a rank gone when its socket closed, before torchrun had copied its last lines. In a real
terminal (tmux): each rank prints a burst of lines and its summary follows (a condition true
every step); rank 1 ends first."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

SCRIPT = Path(__file__).parent / "fixtures" / "ddp_end_burst.py"


def at(rows: list[str], start: str) -> int:
    found = [i for i, r in enumerate(rows) if r.startswith(start)]
    assert found, f"{start!r} not on screen:\n" + "\n".join(rows)
    return found[0]


def in_order(rows: list[str], rank: int) -> None:
    """Rank `rank`'s burst, then its `done`, then its summary (stepdbg's line on its stderr)."""
    done = at(rows, f"[default{rank}]:rank {rank} done")
    assert at(rows, f"[default{rank}]:rank {rank} line 11") < done, "\n".join(rows)
    assert done < at(rows, f"[default{rank}]:stepdbg[rank {rank}]: conditions that stayed true"), "\n".join(rows)


def test_a_ranks_lines_come_before_its_end_summary_and_its_gone_line(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break 'loss>0' torchrun --standalone --nproc_per_node=2 {SCRIPT}",
                size=(200, 70))
    try:
        term.wait_screen("· PAUSED")
        term.keys("9")
        term.keys("c")
        term.wait_screen("the job ended with exit code 0")
        rows = [r.strip() for r in term.screen().splitlines()]  # the Log, as shown
        assert at(rows, "[default1]:rank 1 done") < at(rows, "[rank 1] is gone"), "\n".join(rows)
        in_order(rows, 1)
        in_order(rows, 0)
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
        rows = [r.strip() for r in term.screen().splitlines()]  # the terminal, the TUI gone
        in_order(rows, 1)
        in_order(rows, 0)
    finally:
        term.close()
