"""A request written after the job closed its end loses none of the events that came before
(issue 45, the fifth walk's item 16: test_tui_walk2_log's Ctrl-C from another client was
now and then never said in the Log). The TUI (Pilot) on a real job at a pause; another
client sends the job Ctrl-C; the job says the change and its end, and closes. A request the
TUI writes before it has read them (its refreshes do) met a broken pipe, and asyncio's
stream, on that write error, closed the reading side too: the change and the end, already
on the socket, were dropped, and the Log said `lost the connection` instead. Here the TUI's
loop is held (it reads nothing) until the job has ended, then its request goes out first:
the order that lost them."""

from __future__ import annotations

import contextlib

import pytest
from conftest import WAIT, wait_for

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def log_words(app) -> str:
    return " ".join(" ".join(str(line.text) for line in app.query_one("LogPanel RichLog").lines).split())


@pytest.mark.timeout(WAIT * 2)
async def test_the_change_and_the_end_reach_the_log_though_a_request_met_the_closed_job(start_job):
    job = start_job("--break", "step==3", script_args=("--steps", "20"))
    job.info()
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
            await pilot.press("9")
            other = await AsyncClient.connect()
            await other.interrupt_job()
            job.proc.wait(WAIT)  # (the loop held: the TUI reads nothing while the job ends and closes)
            with contextlib.suppress(OSError):
                await app.source.status()  # a request on the closed connection, before the events are read
            await other.close()
            await wait_for(pilot, lambda: "the job ended" in log_words(app), "the job's end in the Log")
            said = log_words(app)
            assert "change at step 3: Ctrl-C (SIGINT) sent to the job by a front end" in said, said
            assert said.index("change at step 3:") < said.index("the job ended"), said
            app.exit(None)
    finally:
        await client.close(then="end")
