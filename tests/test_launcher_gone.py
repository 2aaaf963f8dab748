"""A job outlives the TUI that launched it (issue 43, item 10).

`stepdbg python train.py` at a real terminal (tmux); the launcher is killed (SIGKILL,
SIGTERM, SIGHUP, or its terminal closes) while the job runs or while it is paused at a
break. The job goes on (a paused one stays paused until a client continues it), its
output goes to the file `stepdbg ls` names, it ends with its own exit code and its report
has its end, and its session files are gone. The keeper, which makes this so, is also
tested alone: what the launcher had not read when it went is not lost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import ROOT, WAIT, Tmux

from stepdbg import client
from stepdbg.launch import keeper
from stepdbg.wire import sessions

SCRIPT = """
    import os, sys, time
    import torch
    from torch import nn

    here = sys.argv[1]
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(12):
        model(torch.randn(4, 2)).sum().backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}", flush=True)
        if step in (5, 8):  # the test kills the launcher at 5, looks at the job at 8
            open(os.path.join(here, f"at{step}"), "w").close()
            while not os.path.exists(os.path.join(here, f"go{step}")):
                time.sleep(0.02)
    print("on stderr", file=sys.stderr, flush=True)
    print("finished", flush=True)
"""


def wait_until(what, why: str, timeout: float = WAIT):
    deadline = time.monotonic() + timeout
    while not (got := what()):
        assert time.monotonic() < deadline, why
        time.sleep(0.05)
    return got


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def all_of(out: Path) -> str:
    """The output file once the job's last lines (one a stream) are in it, else ""."""
    text = out.read_text()
    return text if "finished\n" in text and "on stderr\n" in text else ""


def end_of(report: Path) -> dict | None:
    if not report.exists():
        return None
    return next((e for e in map(json.loads, report.read_text().splitlines()) if e["event"] == "end"), None)


CASES = [("SIGKILL", False), ("SIGTERM", False), ("window", False), ("SIGKILL", True), ("SIGHUP", True)]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None or not sys.platform.startswith("linux"), reason="tmux, /proc")
@pytest.mark.parametrize(("how", "paused"), CASES, ids=[f"{h}-{'paused' if p else 'running'}" for h, p in CASES])
def test_the_job_outlives_its_tui_launcher(tmp_path, private_runtime_dir, monkeypatch, how, paused):
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    script, report = tmp_path / "train.py", tmp_path / "r.jsonl"
    script.write_text(textwrap.dedent(SCRIPT))
    if paused:
        (tmp_path / "go5").touch()
    brk = "--break step==3 " if paused else ""
    term = Tmux(tmp_path, private_runtime_dir, f"{brk}--report {report} {sys.executable} {script} {tmp_path}",
                env=f"XDG_STATE_HOME={state}")
    try:
        term.wait_screen("PAUSED [step==3]" if paused else "RUNNING")
        if not paused:
            wait_until((tmp_path / "at5").exists, "the job never reached step 5")  # (the TUI is up, running)
        job = wait_until(sessions.listing, "no session").pop().pid
        launcher = parent_of(job)
        if how == "window":
            term.hang_up()  # the terminal goes: SIGHUP to its foreground process group
        else:
            os.kill(launcher, getattr(signal, how))
            assert term.exit_code() == str(128 + getattr(signal, how)), term.screen()
        wait_until(lambda: gone(launcher), "the launcher lives on")
        if paused:
            said = subprocess.run([sys.executable, "-m", "stepdbg", "attach", str(job)], input="detach\n",
                                  capture_output=True, text=True, timeout=WAIT, cwd=ROOT).stderr
            assert f"its output goes to {keeper.output_path(job)}" in said and "stays paused" in said, said
            with client.connect() as c:
                assert c.status()["state"] == "paused"
                c.cont()
        else:
            (tmp_path / "go5").touch()
        wait_until(lambda: (tmp_path / "at8").exists() or gone(job), "the job neither printed on nor ended")
        assert not gone(job), f"the job died printing without its launcher; its report:\n{report.read_text()}"
        out = Path(keeper.output_path(job))
        listed = subprocess.run([sys.executable, "-m", "stepdbg", "ls"], capture_output=True, text=True,
                                timeout=WAIT, cwd=ROOT)
        said = " ".join(listed.stdout.split())  # (folded between words where COLUMNS is set)
        assert f"{job}: its launcher is gone; its output goes to {out}" in said, listed
        (tmp_path / "go8").touch()
        end = wait_until(lambda: end_of(report), "the job's end never reached its report")
        assert end["exit_code"] == 0 and end["error"] is None, end
        wait_until(lambda: not list(private_runtime_dir.iterdir()), "session files left")
        text = wait_until(lambda: all_of(out), "the job's last lines never reached the file")
        steps = [int(ln.split()[1]) for ln in text.splitlines() if ln.startswith("step ")]
        first = 4 if paused else 6  # printed after the launcher was gone (some before may be there too)
        assert steps == list(range(steps[0], 12)) and steps[0] <= first, text
        assert "on stderr" in text and "Traceback" not in text and "Broken pipe" not in text, text
        assert oct(os.stat(out).st_mode & 0o777) == oct(0o600)
    finally:
        term.close()


def test_what_the_launcher_had_not_read_goes_to_the_file_first(tmp_path):
    """The keeper passes each stream on; when its reader goes, the bytes it had not read
    yet, then all that follows, are in the file, in order; the keeper ends with the job."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    path = tmp_path / "out" / "job.out"
    kept = subprocess.Popen([sys.executable, "-I", "-S", keeper.__file__, str(out_r), str(err_r), str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(out_r, err_r))
    os.close(out_r)
    os.close(err_r)
    try:
        os.write(out_w, b"read\n")
        assert kept.stdout.readline() == b"read\n"
        os.write(err_w, b"unread on stderr\n")
        os.write(out_w, b"unread 1\nunread 2\n")
        wait_until(lambda: pending(kept.stdout.fileno()) == len(b"unread 1\nunread 2\n"), "the keeper passed nothing on")
        wait_until(lambda: pending(kept.stderr.fileno()) == len(b"unread on stderr\n"), "nothing on stderr")
        for f in (kept.stdin, kept.stdout, kept.stderr):  # the launcher is gone
            f.close()
        wait_until(path.exists, "no file")
        os.write(out_w, b"after\n")
        os.close(out_w)
        os.close(err_w)
        assert kept.wait(timeout=WAIT) == 0
        assert path.read_bytes() == b"unread 1\nunread 2\nunread on stderr\nafter\n"
        assert oct(os.stat(path.parent).st_mode & 0o777) == oct(0o700)
    finally:
        if kept.poll() is None:
            kept.kill()


def pending(fd: int) -> int:
    import fcntl
    import struct
    import termios

    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_the_file_keeps_the_newest_output_and_a_failed_write_harms_nothing(tmp_path):
    sink = keeper.Sink(str(tmp_path / "j.out"), cap=10)
    sink.write(b"0123456789")
    sink.write(b"abc")
    sink.write(b"def")
    assert (tmp_path / "j.out").read_bytes() == b"abcdef" and (tmp_path / "j.out.1").read_bytes() == b"0123456789"
    (tmp_path / "a-file").touch()
    keeper.Sink(str(tmp_path / "a-file" / "output" / "j.out")).write(b"dropped")  # no folder there: no raise


def test_a_launcher_that_fails_says_the_job_goes_on(tmp_path, monkeypatch, capsys):
    """An error in the launcher itself (not a signal) leaves the job going too, and says so."""
    from stepdbg_tui import launch

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))

    def fails(*_args: object) -> int:
        raise RuntimeError("a bug in the launcher")

    monkeypatch.setattr(launch, "_launched", fails)
    job = [sys.executable, "-c", "import time; time.sleep(600)"]
    assert launch.launch_tui(job, dict(os.environ)) == 1
    err = capsys.readouterr().err
    assert "RuntimeError: a bug in the launcher" in err and "the job goes on without stepdbg (pid " in err, err
    pid = int(err.split("(pid ")[1].split(";")[0])
    try:
        assert not gone(pid) and keeper.output_path(pid) in err
    finally:
        os.kill(pid, signal.SIGKILL)
