"""Ctrl-C then i in the TUI on `demos/slow_loader.py --hang` (issue 45, the fifth walk's item
6): the job, stalled in its DataLoader (a worker stuck in a sample), raises KeyboardInterrupt
and ends; no process of its tree is left. Before: the job killed itself with SIGINT straight
after its traceback, skipping what Python's own end runs first (multiprocessing's atexit,
which ends a DataLoader's daemonic workers): the stuck worker was left, orphaned, holding
the job's output open. A plain `python demos/slow_loader.py --hang` with Ctrl-C leaves none."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from conftest import DEMOS, WAIT, wait_for

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def children(pid: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def log_words(app) -> str:
    return " ".join(str(line.text) for line in app.query_one("LogPanel RichLog").lines)


def alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


@pytest.mark.timeout(WAIT * 2)
async def test_ctrl_c_i_on_a_stalled_loader_leaves_no_worker(start_job):
    job = start_job("--break", "stall>2", script=DEMOS / "slow_loader.py", script_args=("--hang",))
    pid = job.info().pid
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    workers: list[int] = []
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: bool(workers.extend(children(pid)) or workers), "the loader's workers")
            await wait_for(pilot, lambda: "[stall>2]" in log_words(app), "the stall's break in the Log")
            await pilot.press("ctrl+c")
            await pilot.press("i")
            await wait_for(pilot, lambda: str(app.status.get("state", "")).startswith("exited"), "the job's end")
        job.proc.wait(WAIT)
        assert job.proc.returncode in (-2, 130), job.proc.returncode
        left = [w for w in workers if alive(w)]
        assert not left, f"the job's workers {left} were left behind"
    finally:
        await client.close(then="end")
        for w in workers:  # (before the fix: the stuck worker, orphaned)
            if alive(w):
                os.kill(w, signal.SIGKILL)
