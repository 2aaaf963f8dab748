"""The breakpoints as the console's `break` lists them and the TUI's Breaks panel shows
them (issue 45, the tenth newcomer walk's item 2).

- the console's `break` listed specs alone: a breakpoint the TUI shows off (○ step==40)
  read as on. Each says on or off.
- a condition that stays true is one break (docs/conditions.md): lr_explode with
  `--break 'grad_norm>200'` did not pause at steps 2 to 4 and nothing said so until the
  end's `grad_norm>200 on 3 more steps`. The console's `break` and the Breaks panel say
  it is quiet since its break, from the same record (the `breakpoints` op's `quiet`).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT, text_of, wait_for

from stepdbg import client

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]

DEMO = ROOT / "demos" / "lr_explode.py"  # the gradient norm is over 200 from step 1 on
QUIET = "quiet since step 1: stays true (through step {}), not reported while it does"


def test_the_consoles_break_says_a_condition_that_stays_true_is_quiet():
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "grad_norm>200", "--on-break", "pause",
                          sys.executable, str(DEMO)], input="break\nuntil 4\nbreak\nc\n", capture_output=True,
                         text=True, cwd=ROOT, timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    assert run.returncode == 0, run.stderr
    said = run.stderr.split("(stepdbg) ")[1:]
    assert said[0] == "  on   grad_norm>200\n", said[0]  # at its break: not quiet yet
    assert said[2] == f"  on   grad_norm>200  {QUIET.format(3)}\n", said[2]


def test_the_consoles_break_says_which_breakpoints_are_off(start_job):
    job = start_job("--break", "nan", "--break", "step==40", script_args=("--nan-at", "3", "--steps", "6"))
    job.info()
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        watcher.enable_break("step==40", False)  # (the TUI's space on its row: ○ step==40)
        run = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl"], input="break\ndetach end\n",
                             capture_output=True, text=True, cwd=ROOT, timeout=WAIT)
    job.finish()
    said = run.stderr.split("(stepdbg) ")
    assert said[1].startswith("  on   nan\n  off  step==40\n"), run.stderr


async def test_the_breaks_panel_says_a_condition_that_stays_true_is_quiet(tui_at_break):
    async with tui_at_break("--break", "grad_norm>200", "--break", "step==3", script=DEMO) as (app, pilot):
        assert app.status["paused"]["condition"] == "grad_norm>200", app.status
        await pilot.press("7")
        await wait_for(pilot, lambda: app.query_one("#breaks-table").row_count == 2, "the rows")
        assert "quiet" not in text_of(app, "#break-error")  # at its break: not quiet yet
        await pilot.press("c")
        await wait_for(pilot, lambda: (app.status.get("paused") or {}).get("condition") == "step==3", "step 3")
        await pilot.press("7")
        await wait_for(pilot, lambda: "quiet" in text_of(app, "#break-error"), "the quiet words")
        assert f"grad_norm>200: {QUIET.format(2)}" in text_of(app, "#break-error").replace("\n", " ")
