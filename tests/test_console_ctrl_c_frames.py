"""Ctrl-C shows the person their own frames only (issue 45, item 11), in a real terminal
(tmux): the traceback a Ctrl-C ends the job with names the script's lines, and nothing of
stepdbg's: no frame of its files, no line saying its frames were hidden, and none of the
queue.py or threading.py frames under its wait at a pause. Each test waits for a screen,
never for a time.

Before: `[10 frames of stepdbg hidden]` then queue.py's get and threading.py's wait after
the TUI's ctrl+c, i at a pause; later `[13 frames of stepdbg hidden]` alone; a Ctrl-C that
landed in the script's forward, called through stepdbg's hook of the model call, showed
`[12 frames of stepdbg hidden]` between the script's lines."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import textwrap

import pytest
from conftest import FIXTURE, Tmux, marked_line

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


def line_of(path, text: str) -> int:
    """The number of the line of `path` that holds `text` (the fixture's model call)."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def traceback_on(screen: str) -> str:
    """The last traceback on the screen, from its first line to the exception's."""
    start = screen.rindex("Traceback (most recent call last):")
    end = screen.index("KeyboardInterrupt", start)
    return screen[start:end + len("KeyboardInterrupt")]


def only_the_persons_frames(tb: str, script: str, line: int) -> None:
    assert f'File "{script}", line {line}' in tb, tb
    for word in ("stepdbg", "hidden", "queue.py", "threading.py", "runpy"):
        assert word not in tb, f"{word!r} in what the person sees:\n{tb}"


def test_ctrl_c_then_i_at_a_pause_in_the_tui_shows_the_scripts_frames_only(tmp_path, private_runtime_dir):
    """The TUI at 80x24 paused at step 3; ctrl+c, i: the job ends (130) with the script's
    line alone in its traceback, as the terminal shows it once the TUI has closed."""
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==3 {sys.executable} {FIXTURE} --steps 100000 "
                "--sleep 0.05", size=(80, 24))
    try:
        term.wait_screen("PAUSED")
        term.keys("C-c")
        term.wait_screen("i: interrupt the job")
        term.keys("i")
        term.wait_screen("exit code 130")
        term.keys("q")  # closes the window of an ended job
        assert term.exit_code() == "130", term.screen()
        screen = term.wait_screen("KeyboardInterrupt")
        only_the_persons_frames(traceback_on(screen), str(FIXTURE), line_of(FIXTURE, "mse_loss(model(x), y)"))
    finally:
        term.close()


SLOW_FORWARD = """
    import time, torch
    from torch import nn

    class Slow(nn.Module):
        calls = 0

        def forward(self, x):
            Slow.calls += 1
            if Slow.calls == 3:  # a step stepdbg has found the model and its optimizer by
                print("in the forward", flush=True)
                time.sleep(600)  # @sleep
            return x

    model = nn.Sequential(nn.Linear(2, 2), Slow())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(5):
        opt.zero_grad()
        model(torch.randn(4, 2)).sum().backward()  # @call
        opt.step()
"""


def test_ctrl_c_that_lands_in_the_scripts_forward_shows_its_frames_only(tmp_path, private_runtime_dir):
    """Ctrl-C (SIGINT) while the script's forward runs (called through stepdbg's
    hook of the model call), at the console (--no-tui): the script's call line and its
    forward's line, nothing of stepdbg's between them."""
    script = tmp_path / "slow.py"
    script.write_text(textwrap.dedent(SLOW_FORWARD))
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui {sys.executable} {script}", size=(80, 24))
    try:
        term.wait_screen("in the forward")
        # The terminal's Ctrl-C, to the job alone: tmux's C-c would end the shell that keeps
        # the exit code too, as bash ends with a child that SIGINT killed.
        session = json.loads(next(private_runtime_dir.glob("*.json")).read_text())
        os.kill(int(session["pid"]), signal.SIGINT)
        assert term.exit_code() == "130", term.screen()
        tb = traceback_on(term.wait_screen("KeyboardInterrupt"))
        only_the_persons_frames(tb, str(script), marked_line(script, "call"))
        frames = re.findall(r'^ *File "([^"]+)", line (\d+)', tb, re.M)  # torch's own calls between, as plain Python
        assert frames[0] == (str(script), str(marked_line(script, "call"))), tb
        assert frames[-1] == (str(script), str(marked_line(script, "sleep"))), tb
    finally:
        term.close()


def test_interrupt_at_the_consoles_pause_shows_the_scripts_frames_only(tmp_path, private_runtime_dir):
    """`interrupt` typed at the console's pause (--no-tui): the job's Ctrl-C, delivered on
    the paused training thread under stepdbg's console, ends it with the script's line alone."""
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --break step==3 --on-break pause {sys.executable} {FIXTURE} "
                "--steps 100000 --sleep 0.05", size=(80, 24))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("interrupt", "Enter")
        assert term.exit_code() == "130", term.screen()
        only_the_persons_frames(traceback_on(term.wait_screen("KeyboardInterrupt")), str(FIXTURE),
                                line_of(FIXTURE, "mse_loss(model(x), y)"))
    finally:
        term.close()
