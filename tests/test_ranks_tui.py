"""The TUI over many ranks: real `torchrun --nproc_per_node=2` jobs on gloo (CPU), the TUI
in process over every rank, and in a real terminal (tmux) ending or leaving the job."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest
from conftest import ROOT, Tmux, wait_for
from test_ranks import FIXTURE, WAIT, finish, start

from stepdbg import client
from stepdbg.wire import sessions

pytestmark = pytest.mark.slow  # real trainers and torchrun end to end (see pyproject: slow)


def changes_in(tmp_path) -> list[dict]:
    """The change events both ranks' reports hold so far."""
    return [json.loads(line) for r in (0, 1) if (tmp_path / f"r.rank{r}.jsonl").exists()
            for line in (tmp_path / f"r.rank{r}.jsonl").read_text().splitlines() if '"change"' in line]


async def test_the_tui_over_a_whole_job(tmp_path, private_runtime_dir):
    """Pilot on the app over both ranks: the Ranks panel, t to switch, an LR set on rank 1
    alone (o) and then on every rank, continue, and the job ends with 0."""
    from textual.widgets import DataTable, Input

    from stepdbg.client.async_client import AsyncClient
    from stepdbg_tui.app import StepdbgApp
    from stepdbg_tui.dialogs import LrScreen
    from stepdbg_tui.job_source import JobSource

    proc = start(tmp_path, "serve", "--break", "nan", script_args=("--nan-at", "2"))
    try:
        deadline = time.monotonic() + WAIT
        while len([s for s in sessions.listing() if s.job_id]) < 2:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        infos = client.find_job()
        source = JobSource([await AsyncClient.connect(i.address, token=i.token) for i in infos])
        app = StepdbgApp(source)

        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
            assert app.status["paused"]["condition"] == "rank 1"  # rank 0 in view, paused for rank 1
            await pilot.press("0")
            await wait_for(pilot, lambda: app.query_one("#ranks-table", DataTable).row_count == 2, "the two ranks' rows")
            await pilot.press("t")
            await wait_for(pilot, lambda: (app.status.get("paused") or {}).get("condition") == "nan", "t: rank 1 in view")
            assert app.source.current == 1
            await pilot.press("o", *"1", "enter")  # changes to rank 1 only: a per-rank LR, on purpose
            await wait_for(pilot, lambda: app.source.targets == [1], "o: rank 1 alone")
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, LrScreen), "the LR dialog")
            app.screen.query_one("#lr-value", Input).value = "0.002"
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(changes_in(tmp_path)) == 1, "rank 1's LR change")  # the change made, not 0.5 s (a worker sends it)
            await pilot.press("o", *"all", "enter")
            await wait_for(pilot, lambda: app.source.targets is None, "o: every rank")
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, LrScreen), "the LR dialog")
            app.screen.query_one("#lr-value", Input).value = "0.001"
            await pilot.press("enter")
            await wait_for(pilot, lambda: len(changes_in(tmp_path)) == 3, "every rank's LR change")  # (else the continue could come first)
            await pilot.press("c")
            await wait_for(pilot, lambda: "job ended" in app.connection, "the job's end")
            await pilot.press("q")
        await source.close()
    finally:
        code, out, err = finish(proc)
    assert code == 0 and out.count("finished") == 2, err[-2000:]
    changes = changes_in(tmp_path)
    assert sorted((c["rank"], c["lr"]) for c in changes) == [(0, 0.001), (1, 0.001), (1, 0.002)]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_torchrun_job_ended_from_the_tui_exits_3_without_torchruns_failure_report(tmp_path, private_runtime_dir):
    """In tmux: `stepdbg torchrun ...`, paused on both ranks; q, e ends it. Every rank exits
    3 as asked; torchrun's ChildFailedError traceback and failure table give way to one
    line, and stepdbg's exit code is 3, not torchrun's 1."""
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==3 torchrun --standalone --nproc_per_node=2 "
                f"{FIXTURE} --steps 100000 --sleep 0.05")
    try:
        term.wait_screen("PAUSED [")  # [step==3], or [rank N] when the other rank broke first
        term.keys("q")
        term.wait_screen("What happens to the job?")
        term.keys("e")
        assert term.exit_code() == "3", term.screen()
        after = term.screen()
        assert "the job ended with exit code 3, as asked from the TUI" in after, after
        assert "ChildFailedError" not in after and "Traceback" not in after and "Root Cause" not in after, after
    finally:
        term.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_torchrun_job_left_paused_from_the_tui_and_ended_over_attach_exits_3_without_the_report(
        tmp_path, private_runtime_dir):
    """q, l leaves the job paused; `stepdbg attach` then ends it with q: the launcher's
    terminal had torchrun's ChildFailedError traceback and exit code 1 (a newcomer's walk)."""
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==3 torchrun --standalone --nproc_per_node=2 "
                f"{FIXTURE} --steps 100000 --sleep 0.05")
    try:
        term.wait_screen("PAUSED [")
        term.keys("q")
        term.wait_screen("What happens to the job?")
        term.keys("l")
        term.wait_screen("without the TUI")
        ended = subprocess.run([sys.executable, "-m", "stepdbg", "attach"], input="q\n", capture_output=True,
                               text=True, timeout=WAIT, cwd=ROOT)  # (the whole job: both ranks end)
        assert ended.returncode == 3, ended.stderr
        assert term.exit_code() == "3", term.screen()
        after = term.screen()
        assert "the job ended with exit code 3, as stepdbg ended it" in after, after
        assert "ChildFailedError" not in after and "Traceback" not in after, after
    finally:
        term.close()


