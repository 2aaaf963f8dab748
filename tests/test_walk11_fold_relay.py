"""Every line of a stepdbg message folds between words at an 80-column terminal, not only
its first (issue 45, the closing walk's 1 and 2). The TUI launcher's relay once the TUI
closed folded the `stepdbg: ...` line alone: a break's source line (`  at train.py:17
loss = ...(model(x` / `), y)`) and a replay's `  domain: ...` were cut by the terminal
mid-word; torchrun's `[default1]:` lines the same. `stepdbg replay BUNDLE` at a terminal
folded nothing (`rebuilt from th` / `e bundle's record`). A real terminal (tmux at 80
columns: its capture joins what the terminal wrapped, so a line over 80 columns is one the
terminal broke); each failed before its fix."""

from __future__ import annotations

import fcntl
import os
import shutil
import struct
import sys
import termios
from pathlib import Path

import pytest
from conftest import Tmux

from stepdbg.wire.fold import OwnLines, for_terminal

pytestmark = pytest.mark.timeout(300)

WIDTH = 80
# A NaN at step 3 made on a long source line: the break's `  at FILE:LINE  SOURCE` is long.
SCRIPT = """
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    if step == 3:
        x[0, 0] = float("nan")
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward(retain_graph=False, create_graph=False)  # the source line the break says, long enough to fold
    opt.step()
    print(f"step {step} loss {loss.item():.4f}", flush=True)
"""
END = "stepdbg: conditions that stayed true (reported once)"


def broken(lines: list[str]) -> str:
    """The lines over WIDTH columns that are more than one word (a word longer than a line,
    a long path, stays whole: the terminal wraps it)."""
    return "\n".join(ln for ln in lines if len(ln) > WIDTH and len(ln.split()) > 1)


def messages(screen: str) -> list[str]:
    """stepdbg's lines on the screen: each `stepdbg...` line and the indented lines after it."""
    out: list[str] = []
    within = False
    for ln in screen.splitlines():
        within = ln.startswith("stepdbg") or (within and ln.startswith(" ") and bool(ln.strip()))
        if within:
            out.append(ln)
    return out


@pytest.fixture
def script(tmp_path: Path) -> Path:
    if shutil.which("tmux") is None:
        pytest.skip("needs tmux")
    path = tmp_path / "long_source.py"
    path.write_text(SCRIPT)
    return path


def test_the_relays_later_lines_of_a_message_fold_between_words(tmp_path, private_runtime_dir, script):
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan {sys.executable} {script}", size=(WIDTH, 24))
    try:
        term.wait_screen("PAUSED [nan]")
        term.keys("q")
        term.wait_screen("continue")  # the quit dialog: c leaves the job running on
        term.keys("c")
        assert term.exit_code() == "0", term.screen()
        screen = term.wait_screen(END)
        lines = messages(screen)
        assert not broken(lines), broken(lines)
        at = next((i for i, ln in enumerate(lines) if ln.startswith("  at")), None)
        assert at is not None, screen
        later = [ln for ln in lines[at + 1:at + 5] if ln.startswith("    ")]  # (its indent and two more)
        said = " ".join(" ".join(ln.split()) for ln in [lines[at], *later])
        assert f"at {script}:13 loss.backward(retain_graph=False, create_graph=False)" in said, screen
    finally:
        term.close()


def test_stepdbg_replay_at_a_terminal_folds_between_words(tmp_path, private_runtime_dir, script):
    """`stepdbg replay BUNDLE` run at the terminal: its lines within 80 columns."""
    term = Tmux(tmp_path, private_runtime_dir,
                f"--no-tui -q --break nan --on-break save --on-break skip --bundle-dir {tmp_path} "
                f"{sys.executable} {script} && {sys.executable} -m stepdbg replay {tmp_path}/stepdbg-step3",
                size=(WIDTH, 40))
    try:
        assert term.exit_code() == "0", term.screen()
        lines = term.wait_screen("from the same state").splitlines()
        at = next((i for i, ln in enumerate(lines) if ln.startswith("stepdbg replay: the model")), None)
        assert at is not None, "\n".join(lines)
        shown = lines[at:]
        assert not broken(shown), broken(shown)
        assert any(ln.startswith("replay of step 3:") for ln in shown), "\n".join(shown)
        assert any(ln.startswith("    ") for ln in shown), "\n".join(shown)  # a `  ...` line's later line
    finally:
        term.close()


def test_a_messages_later_lines_are_stepdbgs_a_ranks_prefix_kept_apart():
    """Which relayed lines are stepdbg's (a torchrun rank's followed apart), and a prefixed
    line's later lines indented under its text."""
    own = OwnLines()
    said = [("stderr[default1]:", "stepdbg[rank 1]: break at step 3"), ("stderr[default0]:", "  File x.py"),
            ("stderr[default1]:", "  at x.py:17  loss = f(x)"), ("stderr", "  the job's own"),
            ("stderr[default1]:", ""), ("stderr[default1]:", "  after a blank line")]
    assert [own.own(w, t) for w, t in said] == [True, False, True, False, False, False]
    line = "[default1]:  domain: log met a value outside its domain: clamp its input to a small positive minimum"
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            lines = for_terminal(line, tty, len("[default1]:")).split("\n")
    finally:
        os.close(leader)
        os.close(follower)
    assert all(len(ln) <= 60 for ln in lines) and len(lines) == 2, lines
    assert lines[1] == " " * len("[default1]:  ") + "  clamp its input to a small positive minimum", lines
