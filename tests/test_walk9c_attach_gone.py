"""`stepdbg attach --repl` to a job that was killed with kill -9 before the attach (issue 45,
a newcomer's walk): its session file was left, and the attach swept it without a word and
said `no stepdbg session is running here (start one with ...)`, as if there had never been
one. Now one line says the job is gone (its pid, killed or crashed, no exit code), exit 1;
said once: the next attach finds nothing, as before."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, WAIT

pytestmark = pytest.mark.usefixtures("private_runtime_dir")


def attach(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stepdbg", "attach", *args, "--repl"], capture_output=True, text=True,
                          cwd=ROOT, timeout=WAIT, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("target", [(), ("pid",)])
def test_attach_to_a_job_killed_before_says_it_is_gone_in_one_line_once(start_job, target):
    job = start_job("--break", "step==2", script_args=("--steps", "6"))
    info = job.info()
    job.proc.kill()
    job.proc.wait()
    args = tuple(str(info.pid) for _ in target)
    got = attach(*args)
    assert got.returncode == 1 and got.stdout == "", got
    assert got.stderr.startswith(f"stepdbg: the job (pid {info.pid}, ") and got.stderr.count("\n") == 1, got.stderr
    assert "is gone, its exit code unknown (killed by a signal, os._exit or a crash)" in got.stderr, got.stderr
    again = attach(*args)  # said once: its files are gone now
    assert again.returncode == 1 and "is gone" not in again.stderr, again.stderr
    assert ("no stepdbg session is running here" if not args else f"no session '{info.pid}'") in again.stderr
