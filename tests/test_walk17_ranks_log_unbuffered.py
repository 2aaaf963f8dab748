"""Under torchrun the Log has rank 0's lines before the break that came after them, in a shell
without PYTHONUNBUFFERED (issue 45, the seventeenth walk's 4): `stepdbg --break nan torchrun
... ddp_nan.py` put `[default0]:step 0 loss ...` and `step 5 loss` AFTER `break at step 6
[nan] on rank 1: ...`. torchrun copies each rank's output (`--tee 3`) to its own stdout, a
pipe to the launcher, with no flush: block-buffered, they came at torchrun's end, while its
stderr (line-buffered) brought the break's line at once. (This machine's environment sets
PYTHONUNBUFFERED=1, which hid it; a newcomer's shell does not.) In a real terminal (tmux), the
environment without it."""

from __future__ import annotations

import shutil

import pytest
from conftest import DEMOS, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def test_rank_0s_lines_before_the_break_come_before_it_in_the_log(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan torchrun --standalone --nproc_per_node=2 "
                f"{DEMOS / 'ddp_nan.py'}", size=(200, 60), env="env -u PYTHONUNBUFFERED")
    try:
        term.wait_screen("step 6 · before_optimizer_step · PAUSED")
        term.keys("9", "c")
        screen = term.wait_screen("job ended, exit code 0")  # (before, rank 0's lines came at torchrun's end)
        rows = [r.strip(" ▊▎│") for r in screen.splitlines()]
        lines = [next((i for i, r in enumerate(rows) if r.startswith(start)), -1)
                 for start in ("[default0]:step 0 loss", "[default0]:step 5 loss", "break at step 6 [")]
        assert -1 not in lines and lines == sorted(lines), screen
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
