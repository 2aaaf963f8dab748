"""The console at the job's own terminal (`--no-tui`) edits its line as pdb's does: Tab
completes a command, a name of the paused frame and an attribute after a dot, Up recalls a
line typed at an earlier pause (issue 45's eighteenth walk: it read the raw line, no Tab, no
history). The job's own readline history and completer are as it left them. A real terminal
(tmux)."""

from __future__ import annotations

import pytest
from conftest import Tmux

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import readline
import torch
from torch import nn

readline.add_history("the job's own line")
model = nn.Linear(4, 1)
for step in range(3):
    model(torch.randn(8, 4)).sum().backward()
last = readline.get_history_item(readline.get_current_history_length())
print(f"job's history: {readline.get_current_history_length()} {last!r}; completer {readline.get_completer()}")
"""


def test_tab_completes_and_up_recalls_at_the_jobs_terminal(tmp_path, private_runtime_dir):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --on-break pause --break step==1 --break step==2 python {script}", size=(100, 30))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("mod", "Tab")
        term.wait_screen("(stepdbg) model")
        term.keys(".wei", "Tab")
        term.wait_screen("(stepdbg) model.weight")
        term.keys(".shap", "Tab")
        term.wait_screen("(stepdbg) model.weight.shape")
        term.keys("Enter")
        term.wait_screen("torch.Size([1, 4])")
        term.keys("c", "Enter")
        term.wait_screen("break at step 2")
        term.keys("Up", "Up")
        term.wait_screen("(stepdbg) model.weight.shape")  # (a line of the pause before)
        term.keys("C-u", "c", "Enter")
        screen = term.wait_screen("job's history:")
        assert "job's history: 1 \"the job's own line\"; completer None" in screen, screen
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
