"""The Threads panel draws a frame's file and function as one line each, whatever they hold
(issue 43's rule: every input untrusted): a code whose file name held newlines (compile()
takes any string) drew lines of its own in the panel, a thread heading and a frame that were
not there; a function name of 300 characters ran past the panel's width. Now a control
character is shown as `?` and a function's name is cut to the room left. A real job under
Pilot at 80x24."""

from __future__ import annotations

import pytest
from conftest import wait_for
from tui_walk import screen_text, settled

pytestmark = pytest.mark.timeout(300)

SCRIPT = """\
import threading
import torch
from torch import nn

gate = threading.Event()
name = "/tmp/odd\\nSpoofed (main)\\n  spoofed.py"
space = {"gate": gate}
exec(compile("def " + "w" * 300 + "():\\n    gate.wait()\\n", name, "exec"), space)
threading.Thread(target=space["w" * 300], name="odd", daemon=True).start()
model = nn.Linear(4, 1)
for step in range(3):
    model(torch.randn(8, 4)).sum().backward()
gate.set()
"""


async def test_a_frames_file_with_newlines_and_a_long_function_keep_one_line(tui_at_break, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    async with tui_at_break("--break", "step==1", script=script) as (app, pilot):
        await pilot.press("8")
        await wait_for(pilot, lambda: "odd" in screen_text(app) and "www" in screen_text(app), "the odd thread")
        await settled(pilot, app)
        shown = screen_text(app)
        assert "Spoofed (main)" not in shown.replace("?Spoofed (main)?", ""), shown
        frame = next(ln for ln in shown.splitlines() if "www" in ln)
        assert "odd?Spoofed (main)?  spoofed.py:2 in www" in frame and frame.rstrip().endswith("…"), shown
