"""Ctrl-C as torchrun starts its ranks (the twentieth walk's 1): the ranks said their one line
each, then torchrun printed its own traceback of the signal (some 60 lines, to
`SignalException: Process N got signal: 2`) and stepdbg exited 1. Now torchrun's traceback is
one line and the exit code is a Ctrl-C's, 130. `stepdbg --no-tui ... torchrun` (its output as
the terminal gets it), the Ctrl-C once torchrun says it starts (its OMP_NUM_THREADS banner),
wherever in torchrun's start it lands; and torchrun's lines as they come, to EndedReport."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from conftest import DEMOS, ROOT, WAIT

from stepdbg.client.ended_report import EndedReport

TORCHRUN_TRACEBACK = [
    "W1127 18:00:04.477000 17165 torch/distributed/elastic/agent/server/api.py:753] Received 2 death signal, "
    "shutting down workers",
    "W1127 18:00:04.478000 17165 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 17172 "
    "closing signal SIGINT",
    "KeyboardInterrupt: Ctrl-C as stepdbg started the job; the script did not run",
    "Traceback (most recent call last):",
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1032, in <module>',
    "    raise SignalException(f\"Process {os.getpid()} got signal: {sigval}\", sigval=sigval)",
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 17165 got signal: 2",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py", line 753, in run',
    "torch.distributed.elastic.multiprocessing.api.SignalException: Process 17165 got signal: 2",
]


def test_torchruns_traceback_of_a_ctrl_c_is_one_line_said_once():
    report = EndedReport(auto=True)
    report.interrupted = True
    shown = [out for line in TORCHRUN_TRACEBACK for out in report.feed(line)]
    assert [s for s in shown if "Traceback" in s or "SignalException" in s or "During handling" in s] == [], shown
    assert shown.count("stepdbg: torchrun and its ranks were ended by the Ctrl-C (torchrun's traceback of it is "
                       "not shown)") == 1, shown
    assert "KeyboardInterrupt: Ctrl-C as stepdbg started the job; the script did not run" in shown, shown
    assert (report.hid, report.code) == (True, 130)


def test_a_ranks_own_keyboard_interrupt_is_shown_whole():
    """Without --tee a rank's lines come unprefixed: its traceback of the Ctrl-C is the user's
    script's, shown as plain torchrun shows it."""
    report = EndedReport(auto=True)
    report.interrupted = True
    rank = ["Traceback (most recent call last):", '  File "/home/you/train.py", line 40, in <module>',
            "    loss.backward()", "KeyboardInterrupt"]
    shown = [out for line in rank + ["step 7 loss 0.1"] for out in report.feed(line)]
    assert shown[:4] == rank, shown


def test_a_traceback_without_a_ctrl_c_is_shown_whole():
    report = EndedReport(auto=True)  # (no Ctrl-C: torchrun's own failure is the user's to read)
    shown = [out for line in TORCHRUN_TRACEBACK[3:8] for out in report.feed(line)]
    assert "torch.distributed.elastic.multiprocessing.api.SignalException: Process 17165 got signal: 2" in shown


@pytest.mark.slow
def test_ctrl_c_as_torchrun_starts_is_one_line_and_exit_130(private_runtime_dir):
    job = subprocess.Popen([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "torchrun", "--standalone",
                            "--nproc_per_node=2", str(DEMOS / "ddp_nan.py")], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True, env=dict(os.environ))
    assert job.stdout is not None
    said = []
    try:
        for line in job.stdout:
            said.append(line)
            if "OMP_NUM_THREADS" in line:
                os.kill(job.pid, signal.SIGINT)  # (a terminal's Ctrl-C: stepdbg passes it to torchrun once)
        code = job.wait(WAIT)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    out = "".join(said)
    assert code == 130, out
    assert "Traceback" not in out and "SignalException" not in out, out
    assert "stepdbg: torchrun and its ranks were ended by the Ctrl-C" in out, out
