"""A runtime directory of any depth works (issue 47): a socket's address holds about 104
bytes, and a home on a network mount, a container's runtime directory or a test's temporary
folder can be deeper. Served jobs, `stepdbg ls`, attach (console and async client) and a
torchrun job, each in a runtime directory of 200 characters."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, WAIT

from stepdbg import client
from stepdbg.client.async_client import AsyncClient
from stepdbg.wire import sessions

DDP = Path(__file__).parent / "fixtures" / "ddp_train.py"


@pytest.fixture
def deep_runtime_dir(tmp_path, monkeypatch) -> Path:
    """A runtime directory whose path is 200 characters long (not yet made: stepdbg makes it)."""
    base = str(tmp_path / "r")
    deep = Path(base + "/" + "d" * (200 - len(base) - 1))
    assert len(str(deep)) == 200
    deep.parent.mkdir()
    monkeypatch.setenv("STEPDBG_RUNTIME_DIR", str(deep))
    return deep


def test_a_served_job_in_a_deep_runtime_dir_is_listed_attached_and_driven(start_job, deep_runtime_dir):
    job = start_job("--break", "step==2", script_args=("--steps", "4"))
    info = job.info()
    assert len(info.local) > 110 and info.local.startswith(str(deep_runtime_dir)), info.local
    ls = subprocess.run([sys.executable, "-m", "stepdbg", "ls", "--json"], capture_output=True, text=True,
                        timeout=WAIT, cwd=ROOT)
    (row,) = json.loads(ls.stdout)
    assert row["pid"] == info.pid and row["state"] in ("running", "paused"), ls.stderr

    async def paused_step() -> int:
        c = await AsyncClient.connect(info.id)
        try:
            return (await c.status())["step"]
        finally:
            await c.close()

    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        assert asyncio.run(paused_step()) == 2
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", info.id], input="p x\nc\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert out.returncode == 0 and "x: float32 [8, 4] on cpu" in out.stderr, out.stderr
        assert watcher.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and "finished" in out, err
    assert not list(deep_runtime_dir.glob("*.sock"))


@pytest.mark.slow
def test_a_torchrun_job_in_a_deep_runtime_dir_has_both_ranks_attachable(tmp_path, deep_runtime_dir):
    cmd = [sys.executable, "-m", "stepdbg", "serve", "--break", "step==1", "--report", str(tmp_path / "r.jsonl"),
           "torchrun", "--standalone", "--nproc_per_node=2", str(DDP), "--steps", "3"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        ranks = client.connect_job()
        try:
            for c in ranks:
                c.wait_paused(WAIT)
            assert sorted(c.status()["step"] for c in ranks) == [1, 1]
            for c in ranks:
                c.cont()
        finally:
            for c in ranks:
                c.close()
        out, err = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0, err[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
