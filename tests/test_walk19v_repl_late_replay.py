"""A REPL that attaches after another client replayed the step is told the replay (issue 45's
eighteenth walk, 5): `stepdbg attach --repl` after the TUI's `r` said the pause's reason as it
was, `... (replay the step to name it)`, and nothing of the replay, though its `info status`
knew one ran. Now its pause says `(the replay at this pause names it)` and the replay's words
follow, as a replay heard while attached is said. A served job paused at a nan break, a first
client's replay, then the REPL's real output."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, WAIT

from stepdbg import client


def test_a_repl_attached_after_a_replay_says_it(start_job, private_runtime_dir):
    job = start_job("--break", "nan", script_args=("--nan-at", "3"))  # (the data holds a nan)
    pid = job.info().pid
    with client.connect() as first:
        brk = first.wait_paused(WAIT)
        assert "replay the step to name it" in brk["reason"], brk
        summary = first.replay()["summary"]  # the TUI's r
        run = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl", str(pid)], input="detach\n",
                             capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env=dict(os.environ))
        said = run.stdout + run.stderr
        assert f"replay of step {brk['step']} (another client asked, before you attached): {summary}" in said, said
        assert "replay the step to name it" not in said and "(the replay at this pause names it)" in said, said
        first.end()


def test_a_repl_attached_after_the_on_break_replay_says_who_ran_it(start_job, private_runtime_dir):
    """The job's own `--on-break replay` ran it, no client: the REPL said `another client
    asked` (and the TUI's Log did too)."""
    job = start_job("--break", "nan", "--on-break", "replay", "--on-break", "pause", script_args=("--nan-at", "3"))
    pid = job.info().pid
    with client.connect() as first:
        brk = first.wait_paused(WAIT)
        run = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl", str(pid)], input="detach\n",
                             capture_output=True, text=True, cwd=ROOT, timeout=WAIT, env=dict(os.environ))
        said = run.stdout + run.stderr
        assert f"replay of step {brk['step']} (the --on-break replay, before you attached): " in said, said
        assert "another client" not in said, said  # (the pause's reason: `the replay that follows will name it`)
        first.end()
