"""The console's `info status` says a nested value by what it holds (issue 45's eighteenth
walk, 4): the loader's line ended `workers=…`, a list of the DataLoader's worker processes cut
to an ellipsis with nothing of it said. Now `workers=2 (pid N alive, sleeping ...; pid M
...)`, bounded (its first items, then how many more). The console's real output, a real job of
demos/slow_loader.py (two workers) paused at step 3."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import DEMOS, ROOT, WAIT

from stepdbg.client.info_text import status_lines


def test_info_status_says_the_loaders_workers_not_an_ellipsis(private_runtime_dir):
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "step==3", "--on-break", "pause",
                          sys.executable, str(DEMOS / "slow_loader.py")], input="info status\nq\n",
                         capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    loader = next(ln for ln in run.stderr.splitlines() + run.stdout.splitlines() if "num_workers=2" in ln)
    assert "…" not in loader, loader
    assert "workers=2 (pid " in loader and loader.count(" alive, ") == 2, loader


def test_a_long_nested_list_is_bounded_and_said_deeper_down_by_its_count():
    line = status_lines({"stall": {"ranks": list(range(8)), "where": {"a": {"b": 1}, "c": [1, 2]}}})[0]
    assert line == "stall  ranks=8 (0; 1; 2; and 5 more), where=(a 1 field; c 2 items)", line


def test_only_the_items_said_are_read():
    """A nested list of a million workers: the first items are said, and only those are read
    (every item's words were built, then all but three dropped: issue 43's leftover)."""
    read = []

    class Counted(list):
        def __iter__(self):
            for x in super().__iter__():
                read.append(x)
                yield x

    line = status_lines({"loader": {"workers": Counted(range(10**6))}})[0]
    assert "workers=1000000 (0; 1; 2; and 999997 more)" in line, line
    assert len(read) <= 3, len(read)
