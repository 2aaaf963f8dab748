"""The job says who ended it, naming the one front end that asked (the nineteenth walk's
leftover: after the TUI's q then e the terminal read `ending the job (exit code 3) as asked by
a front end (the TUI's q then e, or end or q at a console)`, a list where one was meant). The
launcher's terminal (tmux) after q then e; a console's q over attach (its job's stderr)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURE, ROOT, WAIT, Tmux

from stepdbg import client


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_tuis_q_then_e_is_said_as_the_tuis(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==2 {sys.executable} {FIXTURE} --steps 5", size=(80, 24))
    try:
        term.wait_screen("PAUSED")
        term.keys("q")
        term.wait_screen("What happens to the job?")
        term.keys("e")
        assert term.exit_code() == "3", term.screen()
        said = " ".join(term.screen().split())
        assert "ending the job (exit code 3) as asked by the TUI (q then e)" in said, term.screen()
    finally:
        term.close()


def test_a_consoles_q_is_said_as_a_consoles(start_job, private_runtime_dir):
    job = start_job("--break", "step==1", script_args=("--steps", "5"))
    pid = job.info().pid
    with client.connect() as c:
        c.wait_paused(WAIT)
    subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl", str(pid)], input="q\n", capture_output=True,
                   text=True, cwd=ROOT, timeout=WAIT, env=dict(os.environ))
    code, _, err = job.finish()
    assert code == 3 and "ending the job (exit code 3) as asked by a console (q or end)" in err, err
