"""The Log panel as a newcomer's walk at 80x24 met it (issue 45, the second walk's items 2, 9
and 13): a real job, in a real terminal (tmux) or under Pilot; each failed before its fix."""

from __future__ import annotations

import shutil
import sys

import pytest
from conftest import DEMOS, WAIT, Tmux, wait_for

from stepdbg.client.async_client import AsyncClient
from stepdbg_tui.app import StepdbgApp

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]


def log_lines(screen: str) -> list[str]:
    return [ln.strip() for ln in screen.splitlines()]


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_jobs_last_lines_come_before_its_end_in_the_log(tmp_path, private_runtime_dir):
    """`stepdbg --break nan python demos/nan_log.py` at 80x24, c at the pause, the Log (9)
    shown: the job's last line (`done`) and its end summary (`stepdbg: conditions that
    stayed true ...`, written as the job ends) came after `the job ended with exit code 0`
    (the end comes by the socket, the job's output by its pipes, later). Now the end waits
    for the job's output to be read (bounded)."""
    term = Tmux(tmp_path, private_runtime_dir, f"--break nan {sys.executable} {DEMOS / 'nan_log.py'}",
                size=(80, 24))
    try:
        term.wait_screen("PAUSED")
        term.keys("9")
        term.wait_screen("paused at step 30")
        term.keys("c")
        term.wait_screen("job ended, exit code 0")
        term.wait_screen("conditions that stayed true")
        lines = log_lines(term.wait_screen("the job ended with exit code 0"))
        end = lines.index("the job ended with exit code 0")
        assert lines.index("done") < end, lines
        assert next(i for i, ln in enumerate(lines) if "conditions that stayed true" in ln) < end, lines
        term.keys("q")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()


def log_words(app) -> str:
    """The Log panel's lines as drawn (wrapped at the terminal's width), joined into words."""
    return " ".join(" ".join(str(line.text) for line in app.query_one("LogPanel RichLog").lines).split())


@pytest.mark.timeout(WAIT * 2)
async def test_changes_are_said_in_the_persons_words_in_the_log(tui_at_break):
    """At a break at 80x24: `break add grad_norm>1e9` and `lr 0.001 pin` typed on the REPL
    line, then k. The Log said `break_add spec=grad_norm>1e9`, `skip target_step=30` and
    `(param groups 0)`; now the console's words, one place for both."""
    async with tui_at_break("--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        step = app.status["paused"]["step"]
        await pilot.press("e", *"break add grad_norm>1e9", "enter")
        await pilot.press(*"lr 0.001 pin", "enter")
        # the REPL line's answer in the same words (it said "(param groups 0)")
        await wait_for(pilot, lambda: "LR set to 0.001 and pinned (param group 0, was 0.01)"
                       in str(app.query_one("#repl-out").content), "the answer under the line")
        await pilot.press("escape", "k", "9")
        await wait_for(pilot, lambda: log_words(app).count(f"change at step {step}:") == 3, "three changes")
        said = log_words(app)
        assert f"change at step {step}: breakpoint added: grad_norm>1e9" in said, said
        assert f"change at step {step}: LR set to 0.001 and pinned (param group 0, was 0.01)" in said, said
        assert f"change at step {step}: step {step}'s update will be skipped" in said, said
        assert "=" not in said.replace(">1e9", ""), said


@pytest.mark.timeout(WAIT * 2)
async def test_attached_to_a_paused_job_the_log_says_the_break(start_job):
    """`stepdbg attach` to a job paused already (another client saw the break and left it
    paused): the Log was empty. Now it says the break the job is paused at, where it is,
    and the pause."""
    start_job("--break", "nan", script=DEMOS / "nan_log.py").info()
    first = await AsyncClient.connect()
    brk = await first.wait_paused(WAIT)
    await first.close(then="stay")
    client = await AsyncClient.connect()
    app = StepdbgApp(client)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: app.status.get("state") == "paused", "the pause")
            await pilot.press("9")
            await wait_for(pilot, lambda: "paused at step" in log_words(app), "the Log's lines")
            said = log_words(app)
            assert f"break at step {brk['step']} [nan]: loss is nan" in said, said
            assert "at " in said and "nan_log.py:" in said, said
            assert f"paused at step {brk['step']} (" in said, said
            app.exit(None)
    finally:
        await client.close(then="end")


@pytest.mark.timeout(WAIT * 2)
async def test_a_ctrl_c_from_another_client_is_said_in_words(tui_at_break):
    """Paused at step 3; a second client (stepdbg attach's `interrupt`) sends the job Ctrl-C:
    the Log said `change at step 3: interrupt by=a front end, signal=SIGINT`."""
    async with tui_at_break("--break", "step==3", script_args=("--steps", "20")) as (app, pilot):
        other = await AsyncClient.connect()
        try:
            await other.interrupt_job()
        finally:
            await other.close()
        await pilot.press("9")
        await wait_for(pilot, lambda: "change at step 3:" in log_words(app), "the change")
        said = log_words(app)
        assert "change at step 3: Ctrl-C (SIGINT) sent to the job by a front end: its own Ctrl-C handling runs" \
            in said, said
