"""A newcomer's walk (issue 45): a job stuck between steps (a DataLoader worker that hangs)
was not ended by 'end it' (the TUI's q, e; a client's close(then="end")): an end waits for
the next pause point, which a stuck job never reaches. It is now ended from outside after a
grace (exit code 3, the loader's workers killed). And the stall's break, which pauses
nothing, is told to the front ends as a break event (the TUI showed 'no break yet'; not
tested here: the TUI's test of it was not finished this session)."""

from __future__ import annotations

import re
import subprocess
import sys
import time

from conftest import ROOT, WAIT

from stepdbg.wire import sessions

HANG = 100 // 8  # the step whose batch holds slow_loader's stuck sample (100; batches of 8)


def test_a_job_stuck_between_steps_is_ended_when_a_client_asks(private_runtime_dir):
    from stepdbg import client

    # (stall>8, not >2: on a busy machine the first batch's two workers took over 2 s to come,
    # the stall fired before the hang, and the end came at the next pause point instead)
    proc = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", "--break", "stall>8", sys.executable,
                             "demos/slow_loader.py", "--hang", "--slow", "0"], cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT
        while not sessions.listing():
            assert time.monotonic() < deadline and proc.poll() is None, "the job never announced itself"
            time.sleep(0.1)
        c = client.connect(sessions.listing()[0].id)
        assert proc.stderr is not None
        for line in proc.stderr:  # the watchdog's break at the hang: the job is stuck now (a stall
            # before it, of workers a busy machine starts slowly, ends by itself: the job goes on)
            if (m := re.search(r"break at step (\d+) .*\[stall>8\]: no progress for", line)) and int(m[1]) >= HANG:
                break
        c.close(then="end")
        code = proc.wait(WAIT)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 3 and "asked to end, it reached no pause point" in err, err[-2000:]
