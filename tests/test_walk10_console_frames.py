"""The console at a pause, read where the person reads it: the job's own console
(`--no-tui`, lines typed on its stdin) and `stepdbg attach --repl` (issue 45, the tenth
newcomer walk's items 1 and 4).

- `p NAME` ignored the selected frame: after `info mem` (the memory census names the batch
  by the innermost frame's variable, `x`) and `u` to `<module>`, `p x` showed main's batch
  `x float32 [64, 8]` where `x.shape` said NameError: `p` looks NAME up in the selected frame.
- `u` at the outermost frame showed the same frame again, silently.
- `q` typed at the job's own console said 'as asked by a front end (end, or q then e)'.
- Ctrl-L was taken as a character: `clear^Lbreak add loss>100` was a SyntaxError. It clears
  the screen, as a shell's does, and the line is what was typed after it (what is still seen).
- a one-value infinite tensor said `value inf or -inf`: its sign is kept.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

from stepdbg import client

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("private_runtime_dir")]

DEMO = ROOT / "demos" / "nan_log.py"  # main() holds x, the batch; <module> calls main()
DEMO_ARGS = ("--bad-step", "3", "--steps", "6")


def console(lines: list[str]) -> tuple[int, list[str], str]:
    """The job's own console at its NaN break (step 3): `lines` typed; each line's answer, and stderr."""
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "pause",
                          sys.executable, str(DEMO), *DEMO_ARGS],
                         input="".join(f"{line}\n" for line in lines), capture_output=True, text=True, cwd=ROOT,
                         timeout=WAIT, env={**os.environ, "STEPDBG_CONSOLE": "1"})
    return run.returncode, run.stderr.split("(stepdbg) ")[1:], run.stderr


def test_p_looks_the_name_up_in_the_selected_frame_and_u_says_the_outermost():
    code, said, err = console(["info mem", "u", "p x", "x.shape", "u", "d", "p x", "d", "c"])
    assert code == 0, err
    assert said[1].startswith("> ") and "in <module>()" in said[1], said[1]
    assert said[2] == "error: no variable x in this frame\n", said[2]  # (was main's x, the batch)
    assert "NameError: name 'x' is not defined" in said[3], said[3]
    assert said[4].startswith("already at the outermost frame\n> ") and "in <module>()" in said[4], said[4]
    assert said[5].startswith("> ") and "in main()" in said[5], said[5]
    assert said[6].startswith("x: float32 [64, 8] on cpu\n"), said[6]
    assert said[7].startswith("already at the innermost frame\n> ") and "in main()" in said[7], said[7]


def test_p_over_attach_looks_in_the_selected_frame(start_job):
    job = start_job("--break", "nan", script=DEMO, script_args=DEMO_ARGS)
    job.info()
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        run = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl"],
                             input="info mem\nu\np x\nd\np x\ndetach end\n", capture_output=True, text=True,
                             cwd=ROOT, timeout=WAIT)
    job.finish()
    said = run.stderr.split("(stepdbg) ")
    at = next(i for i, s in enumerate(said) if "in <module>()" in s)
    assert said[at + 1] == "error: no variable x in this frame\n", run.stderr
    assert said[at + 3].startswith("x: float32 [64, 8] on cpu\n"), run.stderr


def test_q_at_the_jobs_own_console_says_it_was_asked_there():
    code, said, err = console(["q"])
    assert code == 3, err
    assert "ending the job (exit code 3) as asked by the console at this terminal (q)" in said[0], said[0]
    assert "front end" not in err, err


def test_ctrl_l_clears_and_the_line_is_what_was_typed_after_it():
    code, said, err = console(["clear\fbreak add loss>100", "c"])
    assert code == 0, err
    assert said[0].startswith("stepdbg: change: breakpoint added: loss>100\n"), said[0]
    assert "SyntaxError" not in err, err


def test_a_one_value_infinity_keeps_its_sign():
    code, said, err = console(["t = torch.tensor(float('-inf'))", "p t", "big = torch.tensor([float('inf')])",
                               "p big", "c"])
    assert code == 0, err
    assert said[1] == "t: float32 [] on cpu\n  value -inf\n", said[1]
    assert said[3] == "big: float32 [1] on cpu\n  value inf\n", said[3]
    assert "inf or -inf" not in err, err
