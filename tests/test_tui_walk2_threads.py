"""The Threads panel as a newcomer's walk at 80x24 met it (issue 45, the second walk's item
6): the TUI under Pilot attached to a real job of its own; it failed before its fix."""

from __future__ import annotations

import pytest
from conftest import wait_for
from test_tui_fixes import real

# Steps 0 to 4 run; at step 5 the loop waits in a function of its own (a stalled loader's
# place), for longer than any test.
SCRIPT = """\
import time
import torch
from torch import nn

model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def waits_for_its_data():
    time.sleep(3600)


for step in range(10):
    if step == 5:
        waits_for_its_data()
    model(torch.randn(4, 2)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def threads_text(app) -> str:
    return str(app.query_one("#threads-text").content)


@real
@pytest.mark.timeout(300)
async def test_the_threads_panel_follows_a_running_job(tui_at_break, tmp_path):
    """Paused at step 2, 8 (Threads), then c: the job runs on and waits at step 5 in
    `waits_for_its_data`. The panel kept the stacks of the pause it had left (a stale
    step's); now it follows the running job, as the Ranks panel does."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    async with tui_at_break("--break", "step==2", script=script) as (app, pilot):
        await pilot.press("8")
        await wait_for(pilot, lambda: "MainThread" in threads_text(app), "the stacks")
        assert "waits_for_its_data" not in threads_text(app)
        await pilot.press("c")
        await wait_for(pilot, lambda: "in waits_for_its_data" in threads_text(app), "the stack of the running job")
        assert app.query_one("TabbedContent").active == "threads"
        # which step the stacks are of, as the header says it (the fresh walk's item 6: it said none)
        await wait_for(pilot, lambda: "the threads after step 4 (running)" in threads_text(app), "the heading")


def test_a_frames_file_and_line_are_never_broken_at_80_columns():
    """The fresh walk's item 7: `.../torch/nn/modules/module.py:1778` was folded across two
    lines at 80 columns. The path loses its head instead; FILE:LINE stays whole."""
    from rich.console import Console

    from stepdbg_tui.threads_panel import render_stacks

    path = "/work/main/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py"
    stacks = [{"name": "MainThread", "main": True,
               "stack": [{"file": path, "line": 1778, "function": "_wrapped_call_impl", "code": "return f(x)"}]}]
    console = Console(width=78, record=True)
    console.print(render_stacks(stacks, 78, "the threads at step 3 · before_backward (paused)"))
    lines = console.export_text().splitlines()
    (frame,) = [ln for ln in lines if "in _wrapped_call_impl" in ln]
    assert frame.startswith("  …") and frame.endswith("/nn/modules/module.py:1778 in _wrapped_call_impl"), lines
    assert all(len(ln) <= 78 for ln in lines) and lines[0] == "the threads at step 3 · before_backward (paused)"
