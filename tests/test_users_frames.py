"""What a person sees of the job is their own code: at a pause, in a traceback, in the
threads' stacks and under Ctrl-C, stepdbg and the runner that starts the script are out of
sight (as pdb hides its own frames), wherever the checkout lives and whatever its folder is
called."""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import FIXTURE, ROOT, WAIT

from stepdbg.agent.measure.frames import OWN_DIR, is_own_file, is_user_file, without_own

pytestmark = pytest.mark.usefixtures("private_runtime_dir")

def stepdbg_console(*args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """The console at the job's own terminal, on a pipe."""
    return subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", *args], input=stdin, capture_output=True,
                          text=True, timeout=WAIT, cwd=ROOT, env={**os.environ, "STEPDBG_CONSOLE": "1"})


def frames_of(text: str) -> list[str]:
    """The files of a traceback's frames, as Python prints them."""
    return re.findall(r'^  File "([^"]+)"', text, re.M)


def test_every_file_of_the_package_is_stepdbgs_own_and_none_is_the_users():
    for path in (ROOT / "stepdbg").rglob("*.py"):
        assert is_own_file(str(path)) and not is_user_file(str(path)), path
    assert OWN_DIR == str(ROOT / "stepdbg") + os.sep
    assert is_own_file("<frozen runpy>") and is_user_file(str(FIXTURE)) and not is_own_file(str(FIXTURE))
    assert not is_own_file(str(ROOT / "stepdbg_extras" / "x.py"))  # a name that starts alike is not ours


def test_own_frames_are_left_out_without_a_marker_and_the_launchers_are_dropped():
    own, user = str(ROOT / "stepdbg" / "launch" / "bootstrap.py"), str(FIXTURE)
    frames = [own, "<frozen runpy>", user, own, own, "/torch/nn/modules/module.py", user, own, queue.__file__]
    assert without_own(frames, str) == [user, "/torch/nn/modules/module.py", user]


def test_w_at_a_pause_under_the_launcher_lists_only_the_scripts_frames():
    out = stepdbg_console("--break", "step==1", "--on-break", "pause", sys.executable, str(FIXTURE),
                          "--steps", "3", stdin="w\nc\n")
    assert out.returncode == 0, out.stderr
    listed = re.findall(r"(?:^|\(stepdbg\) )[ >] (\S+):\d+ in ", out.stderr, re.M)
    assert listed and set(listed) == {str(FIXTURE)}, out.stderr
    assert "bootstrap" not in out.stderr and "runpy" not in out.stderr


BOOM = """
    import torch
    from torch import nn

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom in forward")

    model = nn.Sequential(nn.Linear(2, 2), Boom())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        model(torch.randn(4, 2)).sum().backward()
        opt.step()
"""


def test_a_traceback_under_stepdbg_has_the_frames_plain_python_shows(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text(textwrap.dedent(BOOM))
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT)
    under = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "-q", sys.executable, str(script)],
                           capture_output=True, text=True, timeout=WAIT, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert plain.returncode == under.returncode == 1
    # torch's own frames differ (a module call with global hooks takes torch's slow path)
    users = [[f for f in frames_of(t) if is_user_file(f)] for t in (plain.stderr, under.stderr)]
    assert users[0] == users[1] == [str(script), str(script)], under.stderr
    assert not any(is_own_file(f) or f.startswith("<") for f in frames_of(under.stderr)), under.stderr
    assert under.stderr.rstrip().endswith("ValueError: boom in forward")


def test_the_threads_stacks_fold_stepdbgs_frames(session_factory):
    import threading

    from stepdbg.agent.measure.threads import thread_stacks
    from stepdbg.agent.serve.server import serve

    serve(session_factory("nan"), None, announce=False)  # the server's threads: stepdbg's own code
    stacks = thread_stacks(threading.get_ident())
    for t in stacks:
        assert not any(is_own_file(f["file"]) for f in t["stack"]), t
    own = [t for t in stacks if t["name"].startswith("stepdbg")]  # named, their frames not shown at all
    assert own and all(t["own"] and t["stack"] == [] for t in own), own
    assert not next(t for t in stacks if t["main"])["own"]  # the launcher's frames are folded, not the thread


HANDLES_CTRL_C = """
    import sys, torch, stepdbg
    from torch import nn
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    try:
        for step in range(1000):
            model(torch.randn(4, 2)).sum().backward()
            opt.step()
            opt.zero_grad()
    except KeyboardInterrupt:
        print(f"Exiting from training early at step {step}", flush=True)
        sys.exit(5)
"""


def test_interrupt_at_the_jobs_own_console_runs_the_scripts_ctrl_c_handling(tmp_path):
    """pytorch/examples' way: `except KeyboardInterrupt` around the loop. `interrupt` at the
    console is the Ctrl-C of the job's terminal: the handler runs, with the script's exit code."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(HANDLES_CTRL_C))
    out = stepdbg_console("--break", "step==2", "--on-break", "pause", sys.executable, str(script),
                          stdin="interrupt\n")
    assert "Exiting from training early at step 2" in out.stdout, out.stderr
    assert out.returncode == 5, out.stderr
    assert "error: KeyboardInterrupt" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_interrupt_at_the_console_of_a_script_that_ignores_ctrl_c_changes_nothing(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                      + textwrap.dedent(HANDLES_CTRL_C))
    out = stepdbg_console("--break", "step==2", "--on-break", "pause", sys.executable, str(script),
                          stdin="interrupt\nc\n")
    assert out.returncode == 0, out.stderr
    assert "the job ignores Ctrl-C" in out.stderr and "Exiting" not in out.stdout


def test_an_interrupt_at_a_pause_shows_none_of_what_stepdbg_called(tmp_path):
    """A front end's Ctrl-C (the TUI's ctrl+c, i) at a pause, the script not handling it:
    its traceback ends at the user's line, with no line about stepdbg's frames (it went on
    into queue.py's get and threading.py's wait, under stepdbg's wait for a front end)."""
    from stepdbg import client

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(HANDLES_CTRL_C).replace("try:\n", "if True:\n").split("except")[0])
    job = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", "--break", "step==2", sys.executable,
                            str(script)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        from conftest import Job

        Job(job, tmp_path / "r").info()
        with client.connect() as c:
            c.wait_paused(WAIT)
            c.interrupt_job()
            assert c.wait_exited(WAIT)["exit_code"] == 130
        err = job.communicate(timeout=WAIT)[1]
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert "KeyboardInterrupt" in err and frames_of(err) == [str(script)], err
    assert "hidden" not in err and re.search(r"\^+\nKeyboardInterrupt", err), err


def test_a_library_call_that_raises_through_stepdbgs_wrapper_keeps_the_librarys_frames():
    """clip_grad_norm_(..., error_if_nonfinite=True) raises inside torch, under stepdbg's
    wrapper of it: the traceback stopped at the script's line, without torch's four frames
    (the cut past the person's last frame was meant for what stepdbg's own waiting called)."""
    script = ROOT / "tests" / "fixtures" / "clip_refuses.py"
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT)
    under = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "-q", "--break", "nan", sys.executable,
                            str(script)], capture_output=True, text=True, timeout=WAIT, cwd=ROOT,
                           stdin=subprocess.DEVNULL)
    assert plain.returncode == under.returncode == 1
    tb = plain.stderr[plain.stderr.index("Traceback"):]
    assert under.stderr.endswith(tb) and tb.count("clip_grad.py") == 4, under.stderr
