"""`stepdbg diff` stopped from outside, or waiting on a job that never steps (issue 46,
the attacker's findings): its jobs and their DataLoader workers are ended with their
process groups, its private folder removed, one line said; a long run says its progress
and is ended at --timeout; over-cap numbers are refused before a job starts. Real
subprocesses and real torch; each test waits for events (a pid file's lines, a line on
stderr), not for a time."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from test_diff import diff, line, ours

from stepdbg.wire.agent_config import FINGERPRINT_LIMIT

WAIT = 180  # seconds an awaited event may take on a loaded machine before the test fails


def start(*argv: str, tmp: os.PathLike[str], stderr: int | None = subprocess.PIPE) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    return subprocess.Popen([sys.executable, "-m", "stepdbg", "diff", *argv], stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env=env, cwd=ROOT)


def pids_in(path: os.PathLike[str], count: int) -> list[int]:
    """The pids the fixture wrote, once `count` lines are there."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if os.path.exists(path):
            lines = [x for x in open(path).read().split("\n")[:-1] if x]
            if len(lines) >= count:
                return [int(x) for x in lines]
        time.sleep(0.1)
    raise AssertionError(f"the fixture did not write {count} pids to {path}")


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def all_ended(pids: list[int]) -> bool:
    deadline = time.monotonic() + WAIT  # SIGKILLed already; init may take a moment to reap them
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(alive(p) for p in pids)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_job_its_workers_and_the_folder(short_tmp, tmp_path, sig):
    """SIGTERM or SIGHUP while A runs a DataLoader with two workers: exit 128 + the
    signal, one line, no traceback; the job and both workers are gone, and so is the
    stepdbg-diff-* folder (before: stepdbg diff died at once and left all three running)."""
    pidfile = tmp_path / "pids"
    stall = line("diff_stall.py", str(pidfile), "loader")
    proc = start(stall, stall, tmp=short_tmp)
    pids = pids_in(pidfile, 3)
    assert ours(short_tmp), "the private folder exists while the job runs"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"stepdbg diff: stopped by {signal.Signals(sig).name}: "), err
    assert sum(x.startswith("stepdbg diff:") for x in err.splitlines()) == 1, err
    assert all_ended(pids), [p for p in pids if alive(p)]
    assert ours(short_tmp) == []


@pytest.mark.slow
def test_a_process_the_job_started_in_a_session_of_its_own_is_ended_too(short_tmp, tmp_path):
    """The job starts a server in a session of its own (setsid): the job's process group
    does not hold it. SIGTERM to stepdbg diff: the job and that server are both ended (before:
    the server, reparented to init, ran on after stepdbg diff had said it ended it all)."""
    pidfile = tmp_path / "pids"
    stall = line("diff_stall.py", str(pidfile), "setsid")
    proc = start(stall, stall, tmp=short_tmp)
    pids = pids_in(pidfile, 2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert all_ended(pids), [p for p in pids if alive(p)]
    assert ours(short_tmp) == []


@pytest.mark.slow
def test_ctrl_c_at_a_terminal_shows_progress_then_ends_it_all_with_130(short_tmp, tmp_path):
    """stderr a terminal: a progress line every few seconds while A never steps (before:
    no word at all); then SIGINT, as Ctrl-C sends it: exit 130, one line, no
    KeyboardInterrupt traceback, the job and the folder gone."""
    pidfile = tmp_path / "pids"
    stall = line("diff_stall.py", str(pidfile), "sleep")
    master, slave = pty.openpty()
    proc = start(stall, stall, tmp=short_tmp, stderr=slave)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + WAIT
    # The whole line (its end comes in a later read if the terminal split it: its last words were not yet seen)
    while b"(waits for it up to --timeout 3600 s)" not in seen.partition(b"A: still running after ")[2] \
            and time.monotonic() < deadline:
        if select.select([master], [], [], 1)[0]:
            seen += os.read(master, 4096)
    text = seen.decode()
    assert "A: still running after " in text and "(waits for it up to --timeout 3600 s)" in text, text
    pids = pids_in(pidfile, 1)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=WAIT)
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    text = seen.decode().replace("\r\n", "\n")
    assert proc.returncode == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert text.strip().splitlines()[-1].startswith("stepdbg diff: stopped by SIGINT: "), text
    assert all_ended(pids)
    assert ours(short_tmp) == []


@pytest.mark.slow
def test_a_run_that_never_steps_is_said_and_ended_at_the_timeout(short_tmp, tmp_path, monkeypatch):
    """Not at a terminal: a progress line once A has run STEPDBG_DIFF_PROGRESS_EVERY seconds
    (30 unset: this test sat 35 s for one), then at --timeout one line and exit 2, the job
    ended, the folder removed, B never started (before: no --timeout, and stepdbg diff waited
    forever without a word). The line is due at 1 s; the timeout leaves 7 s more for it."""
    monkeypatch.setenv("STEPDBG_DIFF_PROGRESS_EVERY", "1")
    pidfile = tmp_path / "pids"
    stall = line("diff_stall.py", str(pidfile), "sleep")
    r = diff("--timeout", "8", stall, stall, tmp=short_tmp)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert any(x.startswith("A: still running after ") and "(waits for it up to --timeout 8 s)" in x
               and "ended" not in x for x in lines), r.stderr  # (it said `ended at --timeout`, as if it had)
    assert lines[-1].startswith("stepdbg diff: A did not finish within --timeout 8 s ("), r.stderr
    assert lines[-1].endswith("); it was ended") and "running B" not in r.stderr and r.stdout == ""
    assert all_ended(pids_in(pidfile, 1))
    assert ours(short_tmp) == []


@pytest.mark.parametrize(("option", "said"), [
    ("--steps", f"--steps is at most {FINGERPRINT_LIMIT:,}"),
    ("--max-calls", f"--max-calls is at most {FINGERPRINT_LIMIT:,}"),
])
def test_over_cap_numbers_are_refused_before_a_job_starts(short_tmp, tmp_path, option, said):
    """The recorder's cap (FINGERPRINT_LIMIT), refused by the parser: one line, exit 2, and
    the script never ran (before: the job started and failed inside on its configuration)."""
    (tmp_path / "x.py").write_text("open('ran', 'w').close()\n")
    r = diff(option, str(FINGERPRINT_LIMIT + 1), "python x.py", "python x.py", cwd=tmp_path, tmp=short_tmp)
    assert r.returncode == 2, r
    assert r.stderr.strip().splitlines() == [f"stepdbg: {said} (the steps a run records), not {FINGERPRINT_LIMIT + 1}"
                                             if option == "--steps" else
                                             f"stepdbg: {said} (module calls a step), not {FINGERPRINT_LIMIT + 1}"]
    assert not (tmp_path / "ran").exists() and ours(short_tmp) == []


@pytest.mark.parametrize("value", ["0", "-1", "inf", "soon"])
def test_a_bad_progress_interval_is_one_line(value, monkeypatch):
    """STEPDBG_DIFF_PROGRESS_EVERY is refused in one line before a job starts (exit 2)."""
    monkeypatch.setenv("STEPDBG_DIFF_PROGRESS_EVERY", value)
    r = diff("python x.py", "python x.py")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"stepdbg: STEPDBG_DIFF_PROGRESS_EVERY={value!r}: expected a number of seconds above 0 (how long between "
        "stepdbg diff's progress lines when stderr is no terminal); e.g. STEPDBG_DIFF_PROGRESS_EVERY=30"], r.stderr


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "soon"])
def test_a_bad_timeout_is_one_line(value):
    r = diff("--timeout", value, "python x.py", "python x.py")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"stepdbg: --timeout needs a number of seconds >= 0 (0: no limit), not {value!r}"], r.stderr


def test_the_help_states_the_timeouts_default():
    r = diff("--help")
    assert r.returncode == 0 and "--timeout SECONDS" in r.stdout
    assert "default 3600, each run; 0: no limit" in " ".join(r.stdout.split()), r.stdout
