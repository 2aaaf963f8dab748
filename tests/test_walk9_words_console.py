"""The console's words, read where the person reads them: the job's own console (`--no-tui`,
a real job, lines typed on its stdin) and `stepdbg attach --repl` (issue 45, the last
newcomer walk's words).

- `i` said Python's `NameError: name 'i' is not defined`: a lone word that is neither a
  command nor a name in the paused frame says so, with the commands it may mean; every
  one-letter command the help lists does what the help says.
- `p loss` said `loss: float32 [] on cpu requires_grad  nan 1 inf 0`: the summary says a
  one-value tensor's value (`value nan`) and names its counts (`nan: 1, inf: 0, zeros: 0
  of 32`); `p x` of a None says `None`, as
  pdb's p does (a bare expression that is None prints nothing, as Python's REPL).
- `skip` said `change: skip step 3's update will not be applied`, `lr` said `change: lr
  set to ...` where the console over attach and the Log say `LR set to`: the job's line
  and the console's confirmation are wire/change_text's words, one place.
- `info history` showed `-` in the data wait and memory columns with no word of why: a
  legend says they were not measured, and why.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import FIXTURE, ROOT, WAIT

from stepdbg import client
from stepdbg.client.commands import HELP

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]

NAN_AT = 3


def console(lines: list[str], *args: str) -> tuple[int, str]:
    """The job's own console at its NaN break (step 3): `lines` typed, one a prompt; its stderr."""
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "pause", *args,
                          sys.executable, str(FIXTURE), "--nan-at", str(NAN_AT), "--steps", "6"],
                         input="".join(f"{line}\n" for line in lines), capture_output=True, text=True, cwd=ROOT,
                         timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    return run.returncode, run.stderr


def answers(err: str) -> list[str]:
    """What each typed line answered: the text between one prompt and the next."""
    return err.split("(stepdbg) ")[1:]


def test_a_word_that_is_no_command_nor_name_says_so_and_what_it_may_mean():
    code, err = console(["i", "contnue", "c"])
    assert code == 0, err
    said = answers(err)
    assert said[0].strip() == ("i: not a command, nor a name in the paused frame; did you mean info or interrupt? "
                               "(h lists the commands)"), err
    assert said[1].strip().startswith("contnue: not a command") and "did you mean continue?" in said[1], err
    assert "NameError" not in err and "Traceback" not in err, err


def test_every_one_letter_command_of_the_help_does_what_the_help_says():
    for letter in "cnsrpwudq":  # the help's one-letter commands (h is the prompt's: `h for help`)
        assert re.search(rf"(^  |\| |  |; ){letter}( \|| {{2,}}| EXPR| \[N\])", HELP, re.M), letter
    # n then s move the job on (a pause each), q ends it: each after the ones that stay
    code, err = console(["h", "p loss", "w", "u", "d", "r", "n", "s", "q"])
    said = answers(err)
    assert code == 3, err
    assert said[0].startswith("stepdbg console:"), said[0]
    assert said[1].startswith("loss: "), said[1]
    assert said[2].startswith("> ") and "loss.backward()" in said[2], said[2]
    assert said[3].startswith("already at the outermost frame\n> "), said[3]  # (one frame: u and d say so)
    assert said[4].startswith("already at the innermost frame\n> "), said[4]
    assert f"replay of step {NAN_AT}:" in said[5], said[5]
    assert f"break at step {NAN_AT} (after_backward) [pause]" in said[6], said[6]
    assert f"break at step {NAN_AT + 1} (after_backward) [pause]: next step" in said[7], said[7]
    assert "ending the job (exit code 3)" in said[8], said[8]
    assert "Error" not in err and "Traceback" not in err, err


def test_p_names_a_tensors_shape_and_its_nan_and_inf_counts_and_says_none():
    code, err = console(["p loss", "p x", "z = None", "z", "p z", "c"])
    assert code == 0, err
    said = answers(err)
    assert said[0] == "loss: float32 [] on cpu requires_grad\n  value nan\n", said[0]
    assert said[1].startswith("x: float32 [8, 4] on cpu\n  finite values: min "), said[1]
    assert "; nan: 1, inf: 0, zeros: 0 of 32\n" in said[1], said[1]
    assert said[3] == "", said[3]  # `z`, None: nothing, as Python's REPL
    assert said[4] == "None\n", said[4]  # `p z`: None, as pdb's p
    assert "nan 1 inf 0" not in err, err


def test_a_skip_and_an_lr_are_said_in_the_changes_own_words():
    code, err = console(["skip", "lr 0.02", "c"])
    assert code == 0, err
    said = answers(err)
    assert said[0].startswith(f"stepdbg: change: step {NAN_AT}'s update will be skipped: the parameters and the "
                              "optimizer's state stay as they are"), said[0]
    assert said[1] == "stepdbg: change: LR set to 0.02 (param group 0, was 0.01)\n", said[1]
    assert "change: skip " not in err and "lr set to" not in err and "will not be applied" not in err, err


def test_the_console_over_attach_confirms_a_change_as_the_job_says_it(start_job):
    job = start_job("--break", "nan", script_args=("--nan-at", str(NAN_AT), "--steps", "6"))
    job.info()
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        run = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl"], input="skip\nlr 0.02\ndetach end\n",
                             capture_output=True, text=True, cwd=ROOT, timeout=WAIT)
    _, _, job_err = job.finish()
    for words in (f"step {NAN_AT}'s update will be skipped: the parameters and the optimizer's state stay",
                  "LR set to 0.02 (param group 0, was 0.01)"):
        assert words in run.stderr, run.stderr
        assert f"stepdbg: change: {words}" in job_err, job_err


def test_info_history_says_why_a_cell_is_a_dash():
    code, err = console(["info history", "c"])
    assert code == 0, err
    table = answers(err)[0].splitlines()
    head = table[0]
    rows = [r for r in table[1:] if re.match(r"\d+ ", r)]
    assert [r.split()[0] for r in rows] == [str(s) for s in range(NAN_AT)], table
    data_wait = head.index("data wait")
    assert rows[0][data_wait] == "-", table  # the first step of a loop without a DataLoader: nothing to measure from
    legend = table[len(rows) + 1]
    assert legend.startswith("-: not measured (") and "data wait: nothing to measure from" in legend, table
    if any(r.rstrip().endswith("-") or " - " in r[head.index("memory"):] for r in rows):
        assert "memory: read at most every 10 ms" in legend, table
