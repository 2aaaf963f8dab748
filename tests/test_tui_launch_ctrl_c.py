"""Ctrl-C right after `stepdbg python train.py` starts, before the TUI is drawn (issue 45,
item 11), in a real terminal (tmux): the job ends as plain python's Ctrl-C ends it (exit
code 130, no stepdbg traceback), the terminal is given back (no alternate screen left on),
and no process of the job is left behind. Each test waits for an event (the job's process,
its session file), never for a time.

Before: ~40 lines of traceback through bootstrap.py, rewind.py and torch's import, or a
C++ `terminate called` (exit 134); Ctrl-C as the session file appeared left stepdbg waiting
for ever on a job that ran on to its break, paused with no client."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest
from conftest import WAIT, Tmux

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]

COMMAND = f"{sys.executable} demos/nan_log.py"  # breaks at step 30 and pauses, waiting for a client


def job_processes(runtime_dir: Path) -> list[int]:
    """The job's processes (its bootstrap and its keeper): those whose environment names
    this test's runtime directory, and whose command is stepdbg's job side."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (b"stepdbg.launch.bootstrap" in cmd or b"launch/keeper.py" in cmd) and \
                f"STEPDBG_RUNTIME_DIR={runtime_dir}".encode() in env:
            pids.append(int(d.name))
    return pids


def until(predicate, what: str) -> None:
    deadline = time.monotonic() + WAIT  # a guard against a hang, never a measure
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def ended_as_plain_python(term: Tmux, pids: list[int]) -> str:
    """Exit code 130, no stepdbg frame or C++ abort on screen, the terminal given back,
    the job's processes gone; returns the screen."""
    code = term.exit_code()
    screen = term._tmux("capture-pane", "-p", "-J", "-S", "-3000", "-t", term.name, check=False)
    assert code == "130", screen
    assert "/stepdbg/" not in screen and "stepdbg_tui" not in screen, screen  # no frame of stepdbg's
    assert "terminate called" not in screen and "no session" not in screen, screen
    assert term._tmux("display", "-p", "-t", term.name, "#{alternate_on}").strip() == "0", screen
    until(lambda: not any(alive(p) for p in pids), f"the job's processes {pids} to end")
    return screen


def test_ctrl_c_while_the_job_starts_its_agent_ends_it_with_130_and_one_line(tmp_path, private_runtime_dir):
    """C-c as soon as the job's process exists (the agent imports torch, its socket is not
    up): one `KeyboardInterrupt` line, as plain python interrupted at its start, exit 130."""
    term = Tmux(tmp_path, private_runtime_dir, COMMAND, size=(80, 24))
    try:
        until(lambda: len(job_processes(private_runtime_dir)) >= 1, "the job's process")
        pids = job_processes(private_runtime_dir)
        term.keys("C-c")
        screen = ended_as_plain_python(term, pids + job_processes(private_runtime_dir))
        assert "Traceback" not in screen and "KeyboardInterrupt" in screen, screen
        assert "step 0 loss" not in screen, screen  # the script never ran, and the line says so:
        assert "the script did not run" in " ".join(screen.split()), screen
    finally:
        term.close()


def test_ctrl_c_as_the_jobs_session_appears_ends_it_and_stepdbg(tmp_path, private_runtime_dir):
    """C-c the moment the job's session file appears, while stepdbg connects and the TUI
    is coming up: the Ctrl-C goes on to the job and the TUI that was coming closes (stepdbg
    waited for ever on the job, which ran on to its break)."""
    term = Tmux(tmp_path, private_runtime_dir, COMMAND, size=(80, 24))
    try:
        until(lambda: private_runtime_dir.is_dir() and any(private_runtime_dir.glob("*.json")), "the session file")
        pid = int(json.loads(next(private_runtime_dir.glob("*.json")).read_text())["pid"])
        pids = [pid, *job_processes(private_runtime_dir)]
        term.keys("C-c")
        screen = ended_as_plain_python(term, pids)
        assert "KeyboardInterrupt" in screen and "break at step 30" not in screen, screen
    finally:
        term.close()
