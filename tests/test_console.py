"""pdb's manners at the console: a variable is Python, not a command; Ctrl-C at an idle
prompt harms nothing; leaving says what really happens to the job."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import FIXTURE, ROOT, WAIT, Job, Tmux

from stepdbg import client

pytestmark = pytest.mark.usefixtures("private_runtime_dir")

LOOP = """
    import torch, stepdbg
    from torch import nn
    stepdbg.watch("step==1", on_break="pause")
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    c = "a variable named c"
    for step in range(4):
        model(torch.randn(4, 2)).sum().backward()
        opt.step()
        opt.zero_grad()
    print("done")
"""


def start_script(tmp_path, body: str) -> subprocess.Popen[str]:
    p = tmp_path / "train.py"
    p.write_text(textwrap.dedent(body))
    return subprocess.Popen([sys.executable, str(p)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "STEPDBG_CONSOLE": "1"})


def read_until(stream, text: str, timeout: float = WAIT) -> str:
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen:
        ch = stream.read(1)
        assert ch and time.monotonic() < deadline, f"{text!r} never came; got:\n{seen}"
        seen += ch
    return seen


def test_a_name_the_paused_frame_holds_is_python_not_a_command(tmp_path):
    """At the break, `step` and `c` are the script's variables (pdb would step and
    continue); `!step` is Python too; `p` with arguments and `s` stay commands."""
    proc = start_script(tmp_path, LOOP)
    out, err = proc.communicate("step\nc\n!step + 10\nstep = 5\nstep\ns\ncontinue\n", timeout=WAIT)
    assert proc.returncode == 0, err
    assert out.strip() == "done"
    lines = err.splitlines()
    assert "(stepdbg) 1" in lines and "(stepdbg) 'a variable named c'" in lines and "(stepdbg) 11" in lines, err
    assert "(stepdbg) (stepdbg) 5" in lines, err  # the assignment (no output) reached the frame, as in pdb
    assert err.count("stepdbg paused") == 2  # `s` stepped once, `continue` ran to the end


def test_a_line_over_the_limit_is_dropped_and_said_and_the_next_line_runs(tmp_path):
    """The console reads in the job's process: a pipe's 3 MB line is not held whole."""
    proc = start_script(tmp_path, LOOP)
    out, err = proc.communicate("x" * (3 << 20) + "\nstep\ncontinue\n", timeout=WAIT)
    assert proc.returncode == 0 and out.strip() == "done", err[-2000:]
    assert "(stepdbg) error: a line of over 1,048,576 characters was ignored\n1\n" in err, err[-2000:]


def test_ctrl_c_at_an_idle_prompt_does_nothing_to_the_job(tmp_path):
    proc = start_script(tmp_path, LOOP)
    try:
        read_until(proc.stderr, "(stepdbg) ")
        proc.send_signal(signal.SIGINT)
        said = read_until(proc.stderr, "(stepdbg) ")
        assert "Ctrl-C here does nothing to the job: `interrupt` sends it Ctrl-C" in said
        out, err = proc.communicate("continue\n", timeout=WAIT)
        assert proc.returncode == 0 and out.strip() == "done", err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()


def test_detaching_says_what_happens_to_the_job(start_job):
    job = start_job("--break", "step==2", script_args=("--steps", "6"))
    info = job.info()
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        bad = subprocess.run([sys.executable, "-m", "stepdbg", "attach", info.id], input="detach later\ndetach\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert "detach later? detach (the job stays as it is), detach continue or detach end" in bad.stderr
        assert f"detached; the job stays paused: `stepdbg attach {info.id}` comes back" in bad.stderr
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach", info.id], input="detach continue\n",
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        assert out.returncode == 0, out.stderr
        assert "detached; the job goes on" in out.stderr and "the job ended" not in out.stderr, out.stderr
        assert watcher.wait_exited(WAIT)["exit_code"] == 0


def test_the_attached_console_says_a_job_killed_by_kill_9_is_gone(start_job):
    """`stepdbg attach` (the line console), the job killed with kill -9 at a pause: the
    console says the job is gone, its exit code unknown, and exits 1 (issue 45, item 1)."""
    job = start_job("--break", "step==2", script_args=("--steps", "6"))
    info = job.info()
    attach = subprocess.Popen([sys.executable, "-m", "stepdbg", "attach", info.id], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with client.connect() as watcher:
            watcher.wait_paused(WAIT)
            deadline = time.monotonic() + WAIT
            while watcher.status()["frontends"] < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            job.proc.kill()
            job.proc.wait()
        assert attach.wait(timeout=WAIT) == 1  # (its stdin still open: it noticed the loss itself)
    finally:
        if attach.poll() is None:
            attach.kill()
        err = attach.communicate()[1]
    assert f"the job (pid {info.pid}) is gone, its exit code unknown" in err, err

def test_breakpoint_in_a_served_job_waits_for_a_client_without_a_terminal(tmp_path):
    """watch(serve=True): stepdbg.breakpoint() pauses and waits, stdin not a terminal."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import stepdbg
        stepdbg.watch(serve=True)
        for i in range(3):
            if i == 1:
                stepdbg.breakpoint()
            print("iteration", i, flush=True)
    """))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    job = Job(proc, tmp_path / "none")
    try:
        job.info()
        with client.connect() as c:
            assert c.wait_paused(WAIT)["condition"] == "breakpoint()"
            assert c.evaluate("i")["value"] == "1"
            c.cont()
        code, out, err = job.finish()
        assert code == 0 and out.split() == ["iteration", "0", "iteration", "1", "iteration", "2"], err
        assert "not pausing" not in err
    finally:
        if proc.poll() is None:
            proc.kill()


def quit_the_tui(term: Tmux, choice: str) -> None:
    """At the break at step 2: q, then the quit dialog's `choice` (c, l or e)."""
    term.wait_screen("PAUSED [step==2]")
    term.keys("q")
    term.wait_screen("What happens to the job?")
    term.keys(choice)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_ending_the_job_from_the_tui_does_not_say_it_goes_on(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==2 {sys.executable} {FIXTURE} --steps 1000 --sleep 0.01")
    try:
        quit_the_tui(term, "e")
        assert term.exit_code() == "3", term.screen()
        assert "goes on without the TUI" not in term.screen()
    finally:
        term.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_leaving_the_job_paused_says_it_stays_paused(tmp_path, private_runtime_dir):
    term = Tmux(tmp_path, private_runtime_dir, f"--break step==2 {sys.executable} {FIXTURE} --steps 5")
    try:
        quit_the_tui(term, "l")
        said = term.wait_screen("without the TUI")
        assert "the job stays paused without the TUI" in said and "goes on" not in said
        with client.connect() as c:
            assert c.status()["state"] == "paused"
            c.cont()
        assert term.exit_code() == "0"
    finally:
        term.close()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_ctrl_c_before_the_tui_is_up_is_the_jobs_to_handle(tmp_path, private_runtime_dir):
    """Ctrl-C while stepdbg still waits for the job's agent reaches the job too, as at its
    terminal: stepdbg neither kills it (it did: exit 143) nor says it goes on. The job here is
    an interpreter wrapper that handles Ctrl-C and starts Python when the test lets it."""
    started, release = tmp_path / "started", tmp_path / "release"
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\ntrap 'echo the job handles Ctrl-C' INT\ntouch {started}\n"
                       f"while [ ! -e {release} ]; do sleep 0.05; done\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(0o755)
    term = Tmux(tmp_path, private_runtime_dir, f"{wrapper} {FIXTURE} --steps 3")
    try:
        deadline = time.monotonic() + WAIT
        while not started.exists():
            assert time.monotonic() < deadline, term.screen()
            time.sleep(0.05)
        term.keys("C-c")
        term.wait_screen("^C")
        release.touch()
        assert term.exit_code() == "0", term.screen()
        screen = term.screen()
        assert "the job handles Ctrl-C" in screen and "finished" in screen, screen
        assert "without the TUI" not in screen and "Traceback" not in screen, screen
    finally:
        term.close()


ADAM = """
    import torch, stepdbg
    from torch import nn
    stepdbg.watch("step==30", on_break="pause")
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(31):
        opt.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        opt.step()
"""


def test_info_opt_history_timings_and_status_are_tables_not_json(tmp_path):
    proc = start_script(tmp_path, ADAM)
    out, err = proc.communicate("info opt\ninfo history\ninfo timings\ninfo status\nc\n", timeout=WAIT)
    assert proc.returncode == 0, err
    assert "{" not in err and '"' not in err, err  # no JSON
    lines = err.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:4] == ["(stepdbg)", "group", "lr", "pinned"])
    assert lines[header + 1].split()[:4] == ["Adam[0]", "0.001", "-", "2"] and "betas=[0.9, 0.999]" in err
    assert lines[header + 2].startswith("Adam state exp_avg: 2 tensors, norm ") and "no LR scheduler" in err
    steps = next(i for i, line in enumerate(lines) if line.split()[:3] == ["(stepdbg)", "step", "loss"])
    assert [line.split()[0] for line in lines[steps + 1:steps + 21]] == [str(n) for n in range(10, 30)]
    assert "grad norm" in lines[steps] and "data wait" in lines[steps] and " ms " in lines[steps + 1]
    assert any(line.startswith("(stepdbg) this step: ") for line in lines)
    assert any(line.startswith("(stepdbg) pid") for line in lines) and "state      paused" in err
    assert "paused     at step 30 (before_forward) [step==30]: reached step 30" in err  # the break in words


def test_a_nan_in_the_optimizer_state_shows_in_its_largest_value(session_factory):
    import torch
    from torch import nn

    from stepdbg.agent.views.inspection import optimizer_info

    model = nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
    opt.state[model.weight]["exp_avg"][0, 1] = float("nan")
    st = optimizer_info([opt], [], {})[0]["state"]["exp_avg"]
    assert st["norm"] != st["norm"] and st["max_abs"] != st["max_abs"]  # both NaN: max |x| 0.0 hid it


def test_q_as_the_last_line_given_to_attach_answers_with_the_jobs_end(start_job):
    """`printf 'q\\n' | stepdbg attach`: the end of input came before the job's end, and the
    console said 'detached; the job goes on' (exit 0) for a job that was ending with 3."""
    job = start_job("--break", "step==2", script_args=("--steps", "5"))
    job.info()
    with client.connect() as watcher:
        watcher.wait_paused(WAIT)
        out = subprocess.run([sys.executable, "-m", "stepdbg", "attach"], input="q\n", capture_output=True,
                             text=True, timeout=WAIT, cwd=ROOT)
    assert out.returncode == 3, out.stderr
    assert "the job ended with exit code 3" in out.stderr and "goes on" not in out.stderr, out.stderr
    assert job.finish()[0] == 3


def test_a_replay_and_a_save_at_the_jobs_own_console_are_said_once(tmp_path):
    """In process the job says them on stderr (stepdbg: replay of step N: ...); the console
    printed the summary and the verdict a second time."""
    proc = start_script(tmp_path, f"""
        import os, torch
        from torch import nn
        import stepdbg
        os.chdir({str(tmp_path)!r})
        stepdbg.watch("nan", on_break="pause")
        model = nn.Linear(2, 1)
        x = torch.randn(4, 2)
        x[0, 0] = float("nan")
        model(x).sum().backward()
        print("done")
    """)
    out, err = proc.communicate("r\nsave\nc\n", timeout=WAIT)
    assert proc.returncode == 0 and out.strip() == "done", err
    assert err.count("already holds 1 non-finite value,") == 1 and err.count("reproduced from the same state") == 1, err
    assert err.count("evidence bundle: ") == 1 and (tmp_path / "stepdbg-step0").is_dir(), err


def test_the_consoles_help_and_its_ctrl_c_notice_fit_80_columns():
    """A newcomer's terminal: the help wrapped mid-word (`next s` / `tep`) at 80 columns."""
    from stepdbg.client.commands import HELP
    from stepdbg.client.console import IDLE_CTRL_C

    for text in (HELP, IDLE_CTRL_C.format(", `detach` or Ctrl-D leaves")):
        assert max(len(line) for line in text.splitlines()) < 80, text


def test_locals_keep_their_columns_whatever_the_type_names(capsys):
    """`locals` at the console: a type longer than 12 (ArgumentParser) ran into its value."""
    from stepdbg.client.commands import execute

    class Paused:
        def evaluate(self, code):
            return {"value": "False", "output": "", "error": None}

        def frame_locals(self, everything=False):
            return [{"name": "p", "type": "ArgumentParser", "value": "ArgumentParser(prog='train.py')"},
                    {"name": "step", "type": "int", "value": "30"}]

    execute(Paused(), "locals")
    lines = capsys.readouterr().err.splitlines()
    assert [line.index(value) for line, value in zip(lines, ("ArgumentParser(", "30"), strict=True)] == [24, 24]
