"""The ranks dialog (o) after the sixth newcomer walk (issue 45): a set it refuses keeps the
dialog and the text, with the reason, as the LR dialog does. A real `torchrun
--nproc_per_node=2` job on gloo (CPU), the TUI in process over both ranks (test_ranks_tui's
way). It failed before its fix."""

from __future__ import annotations

import time

import pytest
from conftest import wait_for
from test_ranks import finish, start
from textual.widgets import Input
from tui_walk import screen_text, settled

from stepdbg import client
from stepdbg.wire import sessions

pytestmark = pytest.mark.slow  # torchrun end to end

WAIT = 240  # a guard against a hang, never a measure


async def test_a_rank_set_refused_keeps_the_dialog_its_text_and_says_why(tmp_path, private_runtime_dir):
    """The sixth walk's 4: o, `5,x`, Enter: a toast said `bad rank set '5,x'`, the dialog was
    gone with what was typed, and the next keys acted as commands (c continued the job).
    Now the dialog stays with `5,x` and the reason under it; what is typed next goes into it;
    a good set then closes it and is used."""
    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp
    from stepdbg_tui.dialogs import AskScreen
    from stepdbg_tui.job_source import JobSource

    proc = start(tmp_path, "serve", "--break", "nan", script_args=("--nan-at", "2"))
    source = None
    try:
        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        source = JobSource([await AsyncClient.connect(i.address, token=i.token) for i in client.find_job()])
        app = StepdbgApp(source)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
            await pilot.press("o", *"5,x", "enter")
            await settled(pilot, app)
            assert isinstance(app.screen, AskScreen), app.screen
            shown = " ".join(screen_text(app, skip=()).split())
            assert "bad rank set '5,x': use e.g. 0,2-3 or all" in shown, shown
            await pilot.press("c")
            await settled(pilot, app)
            field = app.screen.query_one(Input)
            assert field.value == "5,xc" and app.status.get("state") == "paused", (field.value, app.status)
            field.value = ""
            await pilot.press("1", "enter")
            await settled(pilot, app)
            assert len(app.screen_stack) == 1 and app.source.targets == [1], (app.screen_stack, app.source.targets)
            app.exit(None)
    finally:
        if source is not None:
            await source.close(then="end")  # (a failure too: the job ends, not paused for ever)
        finish(proc)
