"""A torchrun job's lines come in the order its ranks wrote them, in the TUI's Log and on
the terminal once the TUI closes (issue 45, the eighth walk's item 3). torchrun (`--tee
3`, as the TUI launches it) copies each rank's stdout and stderr from two files by two
threads: `[default0]:step 10 loss nan`, printed two steps before, came after rank 0's
`break at step 12` now and then. In a real terminal (tmux): three breaks, each at the
step after one the demo prints its loss at; each break had its own chance to come first. The Log's own words of the break (its event,
by the socket) came before them too: they wait for the rank's line of the break."""

from __future__ import annotations

import shutil

import pytest
from conftest import DEMOS, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

BREAKS = (6, 11, 16)  # ddp_nan.py prints `step N loss ...` on rank 0 at steps 0, 5, 10, 15


def first(rows: list[str], start: str) -> int:
    return next(i for i, r in enumerate(rows) if r.startswith(start))


def in_order(rows: list[str], step: int) -> bool:
    return first(rows, f"[default0]:step {step - 1} loss") < first(rows, f"[default0]:stepdbg[rank 0]: break at step {step} ")


def test_a_ranks_lines_before_a_break_come_before_its_break(tmp_path, private_runtime_dir):
    breaks = " ".join(f"--break step=={s}" for s in BREAKS)
    term = Tmux(tmp_path, private_runtime_dir, f"{breaks} torchrun --standalone --nproc_per_node=2 "
                f"{DEMOS / 'ddp_nan.py'}", size=(220, 60))
    try:
        for s in BREAKS:
            term.wait_screen(f"step {s} · before_optimizer_step · PAUSED")
            if s != BREAKS[-1]:
                term.keys("c")
        term.keys("9")
        term.wait_screen("paused at step 16")
        rows = [r.strip() for r in term.wait_screen("[default0]:step 15 loss").splitlines()]
        # The Log, as shown: the Log's words of each break, once: a rank's own stderr line of it
        # (after torchrun's `[default0]:`) and its `  at FILE:LINE` are said in those words
        # (issue 45: under torchrun the Log showed each break twice)
        assert not [r for r in rows if "stepdbg[rank" in r or r.startswith("[default0]:  at ")], "\n".join(rows)
        # Rank 0's break (said in the Log's words, naming its rank) after rank 0's earlier lines: the Log
        # puts each rank's event at that rank's line of it (it paired it with the first rank's line, so
        # rank 1's line let rank 0's break out before rank 0's `step 15 loss`: issue 45, the ninth walk's 6)
        # (a break every rank hits, step==16, is said once, naming the rank whose event came first, a8a9269:
        # rank 1 prints no step lines, so only rank 0's naming has an order to hold; the terminal's check
        # below holds rank 0's own break line after its lines whichever the Log names)
        at = first(rows, "break at step 16 [step==16] on rank ")
        if rows[at].startswith("break at step 16 [step==16] on rank 0:"):
            assert first(rows, "[default0]:step 15 loss") < at, "\n".join(rows)
        term.keys("q")
        term.wait_screen("What happens to the job?")
        term.keys("e")
        assert term.exit_code() == "3", term.screen()
        rows = [r.strip() for r in term.screen().splitlines()]  # the terminal, the TUI gone
        assert all(in_order(rows, s) for s in BREAKS), "\n".join(rows)
    finally:
        term.close()
