"""sessions.sweep, which the launchers call once the job ended: it removes dead sessions'
files and nothing else, and never raises into the launcher, whose exit code is the job's.
A session file is the user's own, but it may be stale, hand-edited or another host's (a
STEPDBG_RUNTIME_DIR in a shared home)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import WAIT

from stepdbg.wire import sessions


def session_file(d: Path, name: str, **fields: object) -> Path:
    data = {"id": name, "pid": 999_999_999, "host": sessions.node_name(), "argv": ["x"], "address": "a",
            "token": "t", "started": 1.0, **fields}
    path = d / f"{name}.json"
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    return path


@pytest.fixture
def run_dir(private_runtime_dir: Path) -> Path:
    private_runtime_dir.mkdir(mode=0o700)
    return private_runtime_dir


def test_a_dead_file_naming_a_live_sessions_id_leaves_the_live_ones(run_dir: Path) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        session_file(run_dir, "live", pid=live.pid)
        (run_dir / f"{live.pid}.sock").touch()
        session_file(run_dir, "stale", id="live")  # (its id is not its name: it was edited, or copied)
        sessions.sweep()
        left = {p.name for p in run_dir.iterdir()}
        assert {f"{live.pid}.sock", "live.json"} <= left, left  # (the stale file is left: it is not its id's)
    finally:
        live.kill()
        live.wait()


def test_another_hosts_session_is_left(run_dir: Path) -> None:
    session_file(run_dir, "there", host=sessions.node_name() + "-another-node")  # its pid means nothing here
    session_file(run_dir, "gone")
    sessions.sweep()
    assert sorted(p.name for p in run_dir.iterdir()) == ["there.json"]


@pytest.mark.parametrize("fields", [{"pid": 2**31}, {"pid": 2**70}, {"id": "a\0b"}, {"id": "\ud800"},
                                    {"id": "x" * 300}, {"id": "folder"}])
def test_a_file_no_session_writes_neither_raises_nor_stops_the_sweep(run_dir: Path, fields: dict) -> None:
    (run_dir / "folder.json").mkdir()
    session_file(run_dir, "0odd", **fields)  # (first: listing reads in order)
    session_file(run_dir, "gone")
    sessions.sweep()
    assert not (run_dir / "gone.json").exists()


@pytest.mark.slow
def test_the_torchrun_launchers_exit_code_is_the_jobs_beside_an_odd_session_file(run_dir: Path,
                                                                                tmp_path: Path) -> None:
    session_file(run_dir, "odd", pid=2**31)
    script = tmp_path / "ends_3.py"
    script.write_text("import sys\nprint('job ran', flush=True)\nsys.exit(3)\n")
    torchrun = str(Path(sys.executable).parent / "torchrun")
    done = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", torchrun, "--standalone",
                           "--nproc_per_node=1", str(script)], capture_output=True, text=True, timeout=WAIT,
                          env={**os.environ, "STEPDBG_RUNTIME_DIR": str(run_dir)})
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 3, done.stderr
