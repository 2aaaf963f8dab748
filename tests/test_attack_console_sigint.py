"""Ctrl-C at the console's prompt at the job's own terminal (`--no-tui`) is the console's,
not the job's (console.run_console: 'Ctrl-C here does nothing to the job: `interrupt` sends
it Ctrl-C'): where the script set its own SIGINT handler, that handler ran at the prompt
(Python runs it on the main thread, the paused training thread, while the line is read), in
silence; a script that stops or saves on Ctrl-C did so at a keypress meant for the console.
Now the prompt says the Ctrl-C did nothing, and `interrupt` still runs the script's own
handler. A real terminal (tmux)."""

from __future__ import annotations

import pytest
from conftest import Tmux

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(300)]

SCRIPT = """\
import signal
import torch
from torch import nn

def mine(signum, frame):
    print("the job's own Ctrl-C handler ran", flush=True)

signal.signal(signal.SIGINT, mine)
model = nn.Linear(4, 1)
for step in range(2):
    model(torch.randn(8, 4)).sum().backward()
print("at the end " + "its handler:", signal.getsignal(signal.SIGINT) is mine, flush=True)  # (not as listed)
"""


def test_ctrl_c_at_the_prompt_is_the_consoles_and_interrupt_the_jobs(tmp_path, private_runtime_dir):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui --on-break pause --break step==1 python {script}",
                size=(100, 30))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("C-c")
        screen = term.wait_screen("Ctrl-C here does nothing to the job")
        assert "the job's own Ctrl-C handler ran" not in screen, screen
        term.keys("interrupt", "Enter")  # (the job's Ctrl-C, asked for: its handler runs)
        term.wait_screen("the job's own Ctrl-C handler ran")
        term.keys("c", "Enter")
        screen = term.wait_screen("at the end its handler:")
        assert "at the end its handler: True" in screen, screen
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()


def test_ctrl_c_at_a_piped_prompt_is_the_consoles_too(tmp_path, private_runtime_dir):
    """The same where the line is read as a pipe's (STEPDBG_CONSOLE=1, no terminal): SIGINT
    at the prompt ran the script's handler."""
    import os
    import signal
    import subprocess
    import sys

    from conftest import ROOT, WAIT

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "STEPDBG_CONSOLE": "1", "STEPDBG_RUNTIME_DIR": str(private_runtime_dir),
           "PYTHONUNBUFFERED": "1"}
    job = subprocess.Popen([sys.executable, "-m", "stepdbg", "--no-tui", "--on-break", "pause", "--break", "step==1",
                            sys.executable, str(script)], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert job.stderr is not None and job.stdin is not None
        seen = ""
        while "(stepdbg) " not in seen:
            ch = job.stderr.read(1)
            assert ch, f"the job ended before its prompt: {seen}"
            seen += ch
        job.send_signal(signal.SIGINT)  # (the job is this process: stepdbg runs the script in it)
        while "Ctrl-C here does nothing to the job" not in seen:
            ch = job.stderr.read(1)
            assert ch, f"the job ended before its words: {seen}"
            seen += ch
        out, err = job.communicate("c\n", timeout=WAIT)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, (out, seen + err)
    assert "the job's own Ctrl-C handler ran" not in out and "at the end its handler: True" in out, out
