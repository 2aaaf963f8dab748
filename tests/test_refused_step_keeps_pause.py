"""A resuming command the job refuses leaves the client knowing the job is still paused
(the dialogs helper's finding behind the closing walk's 10): a client forgot the pause the
moment it sent `n`, and kept it forgotten when the job refused it (at an uncaught
exception no pause point comes next), so `attach --repl`'s `detach` said "the job goes on"
of a job still paused, and the launcher the same. The console's real stderr; the async
client (the TUI's) and a torchrun Job's ranks go through the same ops.call_op."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

from stepdbg import client
from stepdbg.client import ClientError

pytestmark = [pytest.mark.usefixtures("private_runtime_dir")]

SHAPE_ERROR = ROOT / "demos" / "shape_error.py"


def test_detach_after_a_refused_n_says_the_job_stays_paused(start_job):
    job = start_job(script=SHAPE_ERROR)
    job.info()
    with client.connect() as c:
        c.wait_paused(WAIT)
        with pytest.raises(ClientError):
            c.next_phase()
        assert c.paused is not None and c.paused["condition"] == "exception"  # it knew the pause, refused or not
        run = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl"], input="n\ndetach\n",
                             capture_output=True, text=True, cwd=ROOT, timeout=WAIT)
        assert "error: n: at an uncaught exception" in run.stderr, run.stderr
        assert "detached; the job stays paused" in run.stderr and "the job goes on" not in run.stderr, run.stderr

        async def refused_async() -> dict | None:
            from stepdbg.client.async_client import AsyncClient

            a = await AsyncClient.connect(probe=True)
            try:
                with pytest.raises(ClientError):
                    await a.next_phase()
                return a.paused
            finally:
                await a.close()

        assert asyncio.run(refused_async()) is not None
        c.close(then="end")
    job.proc.wait(WAIT)
