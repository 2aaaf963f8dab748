"""A runtime directory open to other users (issue 45, the fifth walk's item 3): `stepdbg
python demos/nan_log.py` at a terminal, `--no-tui` and `serve` all refuse it in one line
that names the folder, the variable and what to do (exit 2), before any job starts; the
folder is left as the user made it.

Before: the TUI's launcher printed a PermissionError traceback from tui/launch.py, and the
job it had started made the folder 0700 itself and waited paused for ever at its break;
the console and serve silently changed the folder's mode."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT, Tmux
from test_tui_launch_ctrl_c import job_processes

WORDS = "is open to other users (mode 0755)"


def shared_dir(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    d.chmod(0o755)
    return d


@pytest.mark.parametrize("mode", [("--no-tui",), ("serve",)])
def test_console_and_serve_refuse_an_open_runtime_dir_in_one_line(tmp_path, monkeypatch, mode):
    d = shared_dir(tmp_path)
    monkeypatch.setenv("STEPDBG_RUNTIME_DIR", str(d))
    out = subprocess.run([sys.executable, "-m", "stepdbg", *mode, sys.executable, "demos/nan_log.py"], cwd=ROOT,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT)
    assert out.returncode == 2, out
    assert out.stdout == "" and out.stderr.count("\n") == 1, out.stderr
    assert f"STEPDBG_RUNTIME_DIR={d} {WORDS}" in out.stderr and f"chmod 700 {d}" in out.stderr
    assert "Traceback" not in out.stderr and (d.stat().st_mode & 0o777) == 0o755


def test_ls_says_what_to_do_with_an_open_runtime_dir_of_yours(tmp_path, monkeypatch):
    """`stepdbg ls` said of the user's own 0755 folder "another user may have made it"."""
    d = shared_dir(tmp_path)
    monkeypatch.setenv("STEPDBG_RUNTIME_DIR", str(d))
    out = subprocess.run([sys.executable, "-m", "stepdbg", "ls"], cwd=ROOT, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=WAIT)
    assert f"STEPDBG_RUNTIME_DIR={d} {WORDS}" in out.stderr and f"chmod 700 {d}" in out.stderr, out
    assert "another user" not in out.stderr and "Traceback" not in out.stderr, out.stderr


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_tui_launcher_refuses_an_open_runtime_dir_in_one_line(tmp_path):
    d = shared_dir(tmp_path)
    term = Tmux(tmp_path, d, f"{sys.executable} demos/nan_log.py", size=(80, 24))
    try:
        assert term.exit_code() == "2"
        screen = term.screen()
        assert f"STEPDBG_RUNTIME_DIR={d}" in screen and WORDS in screen and "chmod 700" in screen, screen
        assert "Traceback" not in screen and "PermissionError" not in screen, screen
        assert (d.stat().st_mode & 0o777) == 0o755 and not list(d.iterdir())
        assert job_processes(d) == []  # no job was started
    finally:
        term.close()
        for pid in job_processes(d):  # (before the fix: the job it started, paused for ever)
            os.kill(pid, signal.SIGKILL)
