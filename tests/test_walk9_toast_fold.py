"""stepdbg's own lines at an 80-column terminal fold between words, the job's lines stay as
the job wrote them (issue 45, the ninth walk's 6). The terminal's own wrap broke them inside
a word (`the model's input` / ` is already`, `stops a` / `t a break`): in the --no-tui
console (the job's agent writes to its terminal, and the line console's answers at a pause)
and in the TUI launcher's relay of the
job's output once the TUI closes. A real terminal (tmux at 80 columns: its capture joins
what the terminal wrapped, so a line over 80 columns is one the terminal broke); each failed
before its fix. (`stepdbg attach --repl` folded its lines already: tui/repl.Folded, whose
fold is now stepdbg/wire/fold's.)"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import struct
import sys
import termios
from pathlib import Path

import pytest
from conftest import Tmux

from stepdbg.wire.fold import for_terminal

pytestmark = pytest.mark.timeout(300)

WIDTH = 80
# A job that writes a long line of its own to stdout and to stderr, then a NaN at step 3.
SCRIPT = """
import sys
import torch
from torch import nn

words = " ".join(f"word{i}" for i in range(20))
print(f"the job's own long line: {words}", flush=True)
print(f"the job's own long stderr line: {words}", file=sys.stderr, flush=True)
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    if step == 3:
        x[0, 0] = float("nan")
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
"""
BREAK = "stepdbg: break at step 3 (before_backward) [nan]: loss is nan; the model's input"
END = "stepdbg: conditions that stayed true (reported once): nan on 2 more steps"


def folded_as_a_person_reads_it(screen: str) -> None:
    """stepdbg's lines within 80 columns, each continuation indented; the job's own lines
    whole (one line the terminal wrapped: the capture joins it)."""
    lines = screen.splitlines()
    own = [ln for ln in lines if ln.startswith("stepdbg")]
    assert own and all(len(ln) <= WIDTH for ln in own), "\n".join(ln for ln in own if len(ln) > WIDTH)
    at = next(i for i, ln in enumerate(lines) if ln.startswith(BREAK[:40]))
    assert lines[at] == BREAK, screen
    assert lines[at + 1].startswith("  is already non-finite: it came with the data"), screen
    words = " ".join(f"word{i}" for i in range(20))
    assert f"the job's own long line: {words}" in lines, screen
    assert f"the job's own long stderr line: {words}" in lines, screen


@pytest.fixture
def script(tmp_path: Path) -> Path:
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    path = tmp_path / "long_lines.py"
    path.write_text(SCRIPT)
    return path


def test_the_no_tui_consoles_own_lines_fold_between_words_at_80_columns(tmp_path, private_runtime_dir, script):
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --break nan {sys.executable} {script}", size=(WIDTH, 40))
    try:
        assert term.exit_code() == "0", term.screen()
        folded_as_a_person_reads_it(term.wait_screen(END))
        assert "stepdbg: the job goes on: report is the default action; --on-break pause stops\n  at a break" \
            in term.screen(), term.screen()
    finally:
        term.close()


def test_the_line_consoles_answers_fold_between_words_at_80_columns(tmp_path, private_runtime_dir, script):
    """--on-break pause: the console at the job's terminal; its error line (commands.out) was
    one line of 93 columns, broken by the terminal inside the attribute's name."""
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --on-break pause --break nan {sys.executable} {script}",
                size=(WIDTH, 40))
    name = "nonexistent_attribute_that_is_long_and_longer_still_longer"
    try:
        term.wait_screen("(stepdbg) ")
        term.keys(f"p model.{name}", "Enter")
        lines = term.wait_screen("error: a Linear has no attribute").splitlines()  # (not `name`: the typed line holds it)
        at = next(i for i, ln in enumerate(lines) if ln.startswith("error: a Linear has no attribute"))
        assert lines[at:at + 2] == ["error: a Linear has no attribute", f"  {name}"], "\n".join(lines)
        term.keys("c", "Enter")
        folded_as_a_person_reads_it(term.wait_screen(END))
    finally:
        term.close()


def test_the_tui_launchers_relayed_lines_fold_between_words_at_80_columns(tmp_path, private_runtime_dir, script):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan {sys.executable} {script}", size=(WIDTH, 24))
    try:
        term.wait_screen("PAUSED [nan]")
        term.keys("q")
        term.wait_screen("continue")  # the quit dialog: c leaves the job running on
        term.keys("c")
        assert term.exit_code() == "0", term.screen()
        screen = term.wait_screen(END)
        folded_as_a_person_reads_it(screen)
        assert "stepdbg: the job goes on without the TUI (pid " in screen, screen
    finally:
        term.close()


def test_folded_only_where_the_stream_is_a_terminal_and_at_its_width():
    line = "stepdbg: " + " ".join(f"word{i}" for i in range(30))
    assert for_terminal(line, io.StringIO()) == line  # (a pipe, a file: as it is)
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 50, 0, 0))
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            lines = for_terminal(f"{line}\n  at x.py:3", tty).split("\n")
    finally:
        os.close(leader)
        os.close(follower)
    assert all(len(ln) <= 50 for ln in lines) and lines[-1] == "  at x.py:3", lines
    assert " ".join(" ".join(ln.split()) for ln in lines[:-1]) == line and lines[1].startswith("  word"), lines
