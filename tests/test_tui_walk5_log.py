"""The Log is the record (the fourth newcomer walk's items 5, 13 and 16): a replay and its
verdict are in it, whoever ran it. The TUI under Pilot attached to a real job of its own
(conftest's tui_at_break); each failed before its fix."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from conftest import DEMOS, FIXTURE, WAIT, Tmux, wait_for
from test_tui_fixes import real
from test_tui_walk2_log import log_words


@real
@pytest.mark.parametrize("how", ["r", "--on-break replay"])
async def test_the_log_shows_a_replay_and_its_verdict(tui_at_break, how):
    """The walk's 13: the Log never showed a replay, by r nor by `--on-break replay`; the
    Break panel's copy went with the next pause."""
    actions = ("--break", "step==0", "--on-break", "replay", "--on-break", "pause") if how != "r" else ()
    async with tui_at_break(*actions, "--break", "nan", script=DEMOS / "nan_log.py") as (app, pilot):
        if how == "r":
            await pilot.press("r")
            await wait_for(pilot, lambda: app.replay_result is not None, "the replay's answer")
        else:  # (the first pause's replay ran before the TUI attached: the NaN's runs in its sight)
            app.action_cont()
            await wait_for(pilot, lambda: (app.status.get("paused") or {}).get("condition") == "nan", "the NaN")
        step = app.status["paused"]["step"]
        await pilot.press("9")  # (the Log's lines are drawn once it is shown)
        said = f"replay of step {step}: " if how == "r" else f"replay of step {step} (the --on-break replay): "
        await wait_for(pilot, lambda: said in log_words(app), "the replay in the Log")
        words = log_words(app)
        assert "features" in words.split(said, 1)[1], words


@pytest.mark.slow
@pytest.mark.timeout(WAIT * 2)
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_launched_job_killed_by_sigkill_is_said_so_in_the_tui_and_after_it(tmp_path, private_runtime_dir):
    """The walk's 16: `stepdbg python train.py`, then `kill -9` the job: the TUI said only
    that the connection was lost, and nothing after it closed (the exit code 137 alone). Now
    the header and the Log say it was killed by SIGKILL, and so does the launcher after the
    TUI, which exits 137 as a shell would."""
    term = Tmux(tmp_path, private_runtime_dir, f"{sys.executable} {FIXTURE} --steps 100000 --sleep 0.05", size=(80, 24))
    try:
        term.wait_screen("RUNNING")
        pid = next(json.loads(f.read_text())["pid"] for f in private_runtime_dir.glob("*.json"))
        os.kill(pid, signal.SIGKILL)
        term.wait_screen("killed by SIGKILL")
        term.keys("9")
        term.wait_screen("the job was killed by SIGKILL (exit code 137 / -9)")
        term.keys("q")
        assert term.exit_code() == "137", term.screen()
        assert f"stepdbg: the job (pid {pid}) was killed by SIGKILL (exit code 137 / -9)" in term.screen()
    finally:
        term.close()


ENDS_ON_A_GATE = '''import atexit, os, sys, time
import torch
from torch import nn

gate = sys.argv[1]


def wait_for_the_gate():  # the job's end waits for the test (its last atexit: before stepdbg's)
    while not os.path.exists(gate):
        time.sleep(0.05)


atexit.register(wait_for_the_gate)
model = nn.Linear(4, 1)
for step in range(5):
    x = torch.randn(8, 5 if step == 2 else 4)  # step 2's forward raises: no one catches it
    model(x).sum().backward()
'''


@pytest.mark.slow
@pytest.mark.timeout(WAIT * 2)
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_after_an_uncaught_exceptions_break_the_job_is_said_to_be_ending(tmp_path, private_runtime_dir):
    """The walk's 10: `stepdbg python` of a script whose forward raises, n at the exception's
    break: while the exception ended the job (its last lines on their way), the header said
    `before_forward · RUNNING` and s said `the job is not paused`. Now: ENDING, the exception
    not caught, and s says the job is ending; after the end, that it has ended."""
    script, gate = tmp_path / "raises.py", tmp_path / "gate"
    script.write_text(ENDS_ON_A_GATE)
    term = Tmux(tmp_path, private_runtime_dir, f"--break exception {sys.executable} {script} {gate}", size=(80, 24))
    try:
        term.wait_screen("PAUSED [")
        term.keys("c")  # (c lets the exception go on; n and s are refused there since 2c16b5a)
        shown = term.wait_screen("ENDING")
        assert "RuntimeError not caught" in shown and "before_forward" not in shown, shown
        term.keys("s")  # (the end is said at most OUTPUT_ENDS_WITHIN after: either words, never `not paused`)
        said = next(s for s in iter(term.screen, None) if "the job is ending" in s or "the job has ended" in s)
        assert "not paused" not in said, said
        gate.write_text("")
        term.wait_screen("job ended, exit code 1")
        term.keys("s")
        assert "not paused" not in term.wait_screen("the job has ended")
    finally:
        term.close()


PRINTS_EACH_STEP = """import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(8):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} printed")  # (no flush: a pipe's stdout holds it)
"""


@pytest.mark.slow
@pytest.mark.timeout(WAIT * 2)
def test_the_jobs_own_lines_come_before_stepdbgs_words_about_later_steps(tmp_path):
    """The walk's 5: with the job's stdout a pipe (block-buffered, no PYTHONUNBUFFERED), a
    later step's finding came before the job's own earlier prints. The output, both streams
    in one pipe as a terminal would show them: steps 0 to 4's lines, then the finding of
    step 5 (a breakpoint whose expression raised there)."""
    script = tmp_path / "prints.py"
    script.write_text(PRINTS_EACH_STEP)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    out = subprocess.run([sys.executable, "-m", "stepdbg", "--break", "expr:1 / (step - 5) > 100", sys.executable,
                          str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         text=True, env=env, timeout=WAIT).stdout
    lines = out.splitlines()
    finding = next(i for i, ln in enumerate(lines) if "finding [breakpoint_raised]" in ln)
    assert [i for i, ln in enumerate(lines) if ln in {f"step {n} printed" for n in range(5)}] == list(range(5)), out
    assert finding > 4, out
