"""Tab at the console's line (`--no-tui`, 84b04e4) after a dot that follows no name
(`model.weight[0].sha`, `"text".up`: readline's word is `.sha`, the bracket and the quote
being delimiters) offered the paused frame's own names as if they were attributes, and
completed the line to `model.weight[0].shared` (a variable of the frame). Nothing is offered
where there is no name before the dot. A real terminal (tmux)."""

from __future__ import annotations

import pytest
from conftest import Tmux

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import torch
from torch import nn

shared = "a variable of the frame"
model = nn.Linear(4, 1)
for step in range(2):
    model(torch.randn(8, 4)).sum().backward()
"""


def test_tab_after_a_dot_with_no_name_before_it_offers_no_frame_name(tmp_path, private_runtime_dir):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --on-break pause --break step==1 python {script}", size=(100, 30))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("model.weight[0].sha", "Tab", "Tab", "Enter")  # (Tab twice: readline lists what it offers)
        screen = term.wait_screen("Error")  # (the line as typed, evaluated: a tensor has no .sha)
        assert ".shared" not in screen, screen
        term.keys("sha", "Tab")
        term.wait_screen("(stepdbg) shared")  # (the frame's name, where it is one, still offered)
        term.keys("C-u", "c", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
