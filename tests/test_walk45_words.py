"""Words a newcomer reads (issue 45, a newcomer's walk): right, and whole at 80 columns.

- `stepdbg.breakpoint()` under `if step == 5:` after `opt.step()` said `break at step 6
  (breakpoint)` while the user's `step` printed 5: a breakpoint between steps (the update
  done, no forward begun) is the step that ended's, `break at step 5 (breakpoint, between
  steps)`, its scalars (the Break panel's loss) step 5's, and the TUI's header says `after
  step 5` as it does of a job running there.
- At 80 columns `stepdbg ls` (a job run as `train_loop.py --steps 200 --sleep 0.3`) was 93
  characters a row: the terminal broke the SCRIPT column inside `0.3`. `stepdbg --help`'s
  commands lines were 83 to 96 characters, and `stepdbg diff` (the README presents it)
  was not among them.
- `.venv/bin/stepdbg python train.py` in a shell that never activated the venv (as the
  README allows) ran the PATH's python, which had no torch: the script failed. A bare
  `python` without torch gives way to stepdbg's own interpreter, said once on stderr; one
  with torch (an environment of the user's) is still the one used.
- `stepdbg diff`'s progress said `(ended at --timeout 3600 s)` of a run going on
  (test_diff_stop). In `stepdbg attach --repl` on a running job, `p loss` said `error:
  the job is running; pause it first` without naming the command that pauses it.
Each test looks at the real output (a terminal, a process's stdout and stderr) and failed
before its fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURE, ROOT, WAIT, Job, Tmux

from stepdbg import client
from stepdbg_tui.header import render_header

BETWEEN = textwrap.dedent("""
    import torch
    from torch import nn
    import stepdbg
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(8):
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.4f}", flush=True)
        if step == 5:
            stepdbg.breakpoint()
""")


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "between.py"
    script.write_text(BETWEEN)
    return script


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_breakpoint_after_the_update_is_the_step_that_ended(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--no-tui {sys.executable} {_script(tmp_path)}", size=(80, 30))
    try:
        term.wait_screen("(stepdbg) ")
        term.keys("p step", "Enter")
        screen = term.wait_screen("step: int 5")
        assert "stepdbg: break at step 5 (breakpoint, between steps) [breakpoint()]" in screen, screen
        assert "after step 5 ended, before step 6 began" in screen, screen
        assert "step 6" not in screen.split("(stepdbg)")[0].replace("before step 6 began", ""), screen
        term.keys("c", "Enter")
        assert term.exit_code() == "0", term.screen()
        assert "step 7 loss" in term.screen()
    finally:
        term.close()


def test_the_header_paused_between_steps_says_after_the_step_that_ended(tmp_path, private_runtime_dir):
    proc = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", sys.executable, str(_script(tmp_path))],
                            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        Job(proc, tmp_path / "none").info()
        with client.connect() as c:
            brk = c.wait_paused(WAIT)
            assert brk is not None and brk["step"] == 5 and brk["phase"] == "breakpoint, between steps", brk
            status = c.call("status")
            header = render_header({"pid": proc.pid, "argv": ["python", "between.py"]}, status, 12.0,
                                   "connected", 80).plain
            assert "after step 5 · PAUSED [breakpoint()]" in header, header
            assert "step 6" not in header, header
            c.cont()
        out, err = proc.communicate(timeout=WAIT)
        assert proc.returncode == 0 and "step 7 loss" in out, err
        loss = brk["scalars"]["loss"]  # (the Break panel's: the ended step's, not `-` of a step not begun)
        assert loss is not None and f"step 5 loss {loss:.4f}" in out, (brk["scalars"], out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()



def stepdbg_at(columns: int, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "stepdbg", *args], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=WAIT)


def too_wide(text: str, columns: int) -> list[str]:
    return [line for line in text.splitlines() if len(line) > columns]


def test_ls_at_80_columns_folds_the_script_between_its_words(tmp_path, start_job):
    argv = (str(FIXTURE.relative_to(ROOT)), "--steps", "200", "--sleep", "0.3", "--start-after",
            str(tmp_path / "never"))
    start_job(script=Path(argv[0]), script_args=argv[1:]).info()
    done = stepdbg_at(80, "ls")
    # (the test's go-file's path, wider than a line, stays whole on a line of its own)
    assert done.returncode == 0 and all(len(line.split()) == 1 for line in too_wide(done.stdout, 80)), done.stdout
    words = done.stdout.split()
    assert all(w in words for w in argv), done.stdout  # (each whole: `0.3` not `0.` and `3`)
    assert words[:7] == ["ID", "PID", "HOST", "RANK", "STEP", "STATE", "SCRIPT"], done.stdout
    piped = subprocess.run([sys.executable, "-m", "stepdbg", "ls"], cwd=ROOT, capture_output=True, text=True,
                           env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, timeout=WAIT)
    assert " ".join(argv) in piped.stdout, piped.stdout  # (into a pipe: a row a line, whole)


@pytest.mark.parametrize("columns", [80, 100])
def test_help_fits_the_terminal_and_lists_diff(columns):
    done = stepdbg_at(columns, "--help")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert not too_wide(done.stdout, columns) or too_wide(done.stdout, columns) == [lines[0]], \
        too_wide(done.stdout, columns)  # (argparse's usage line is its own)
    commands = done.stdout.split("commands (each has its own --help):")[1].split("\n\n")[0]
    assert 'stepdbg diff [--steps N] "COMMAND A" "COMMAND B"' in commands, commands
    said = " ".join(commands.split())
    for what in ("where two runs first differ", "headless; a break waits for a client",
                 "replay a saved step (--on-break save)", "STEPDBG_AUTOSTART=1 starts an agent"):
        assert what in said, commands



def test_torchrun_help_fits_80_columns():
    done = stepdbg_at(80, "torchrun", "--help")
    assert done.returncode == 0 and not too_wide(done.stdout, 80), too_wide(done.stdout, 80)
    assert "  stepdbg --break nan --on-break rewind --keep-every 50 --max-rewinds 3 \\\n" \
           "      torchrun --nproc_per_node=2 train.py\n" in done.stdout, done.stdout


RUNS = "import os, sys, torch\nprint('ran under', os.environ.get('WRAPPED', '-'), flush=True)\n"


def _path_with_python(tmp_path: Path, python_args: str) -> str:
    """A PATH whose `python` is stepdbg's own interpreter with `python_args` (-S: no
    site-packages, so no torch), marked WRAPPED=1 in the script's environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nWRAPPED=1 exec {sys.executable} {python_args} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


@pytest.mark.parametrize("has_torch", [False, True])
def test_stepdbg_python_runs_under_an_interpreter_with_torch(tmp_path, private_runtime_dir, has_torch):
    script = tmp_path / "train.py"
    script.write_text(RUNS)
    env = {**os.environ, "PATH": _path_with_python(tmp_path, "" if has_torch else "-S")}
    done = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "python", str(script)], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=WAIT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    said = f"stepdbg: `python` on the PATH has no torch ({tmp_path / 'bin' / 'python'});"
    if has_torch:  # the user's own python, with torch: used, nothing said
        assert "ran under 1" in done.stdout and "has no torch" not in done.stderr, done
    else:
        assert "ran under -" in done.stdout, done
        assert done.stderr.count(said) == 1, done.stderr
        assert f"  the script runs under stepdbg's own interpreter: {sys.executable}" in done.stderr, done.stderr


NOT_PAUSED = "error: the job is running; pause it first (type `pause`)"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_the_repl_names_the_command_that_pauses_a_running_job(tmp_path, private_runtime_dir, start_job):
    start_job(script_args=("--start-after", str(tmp_path / "never"))).info()  # (running, never pausing)
    term = Tmux(tmp_path, private_runtime_dir, "attach --repl", size=(80, 24), env=f"XDG_STATE_HOME={tmp_path}")
    try:
        term.wait_screen("running; h for help")
        term.keys("p loss", "Enter")
        screen = term.wait_screen(NOT_PAUSED)
        assert "Traceback" not in screen, screen
        term.keys("detach", "Enter")
        assert term.exit_code() == "0", term.screen()
    finally:
        term.close()
    # The line console (stdin not a terminal) says the same.
    piped = subprocess.run([sys.executable, "-m", "stepdbg", "attach", "--repl"], cwd=ROOT, input="p loss\ndetach\n",
                           capture_output=True, text=True, timeout=WAIT)
    assert NOT_PAUSED in piped.stdout + piped.stderr, piped
