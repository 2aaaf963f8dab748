"""Every view has a cost bound whatever the process holds (issue 43's trust): a job with
2,000 threads, each waiting 300 calls deep, one of them named by a 100,000-character string.
Every thread's whole stack was read and told: the `stacks` answer and a stall's break (its
threads) were over the wire's 16 MB frame, which is refused. Each thread is told with its
innermost frames (the front ends show the last 8 to 10) and the view says what it left out."""

from __future__ import annotations

import json

import pytest
from conftest import WAIT, paused_job

from stepdbg.agent.measure import threads
from stepdbg.client.info_text import thread_lines
from stepdbg.wire.protocol import MAX_FRAME

pytestmark = [pytest.mark.usefixtures("private_runtime_dir"), pytest.mark.timeout(600)]

SCRIPT = """\
import sys, threading
import torch

sys.setrecursionlimit(5000)
gate, ready = threading.Event(), threading.Semaphore(0)

def deep(n):
    if n:
        return deep(n - 1)
    ready.release()
    gate.wait()

workers = [threading.Thread(target=deep, args=(300,), daemon=True,
                            name="w" * 100_000 if i == 0 else f"worker-{i}") for i in range(2000)]
for w in workers:
    w.start()
for w in workers:
    ready.acquire()
model = torch.nn.Linear(4, 1)
for step in range(3):
    model(torch.randn(8, 4)).sum().backward()
gate.set()
print("end", flush=True)
"""


def test_the_stacks_of_two_thousand_deep_threads_are_told_in_part_and_say_so(start_job, tmp_path):
    with paused_job(start_job, tmp_path, SCRIPT, "--break", "step==1") as (job, c):
        stacks = c.stacks()
        assert len(json.dumps(stacks)) < MAX_FRAME // 4, len(json.dumps(stacks))
        workers = [t for t in stacks if t["name"].startswith(("worker-", "w"))]
        assert len(workers) == 2000, len(workers)
        shown = [t for t in workers if t["stack"]]
        assert 0 < len(shown) <= threads.THREADS_MOST and all(len(t["stack"]) <= threads.FRAMES_MOST for t in shown)
        assert all(t["frames_not_shown"] > 250 for t in shown), shown[0]
        assert shown[0]["stack"][-1]["function"] == "wait", shown[0]["stack"][-1]  # the innermost kept
        assert sum(1 for t in workers if t.get("stack_not_read")) == 2000 - len(shown)
        assert max(len(t["name"]) for t in stacks) <= threads.NAME_MOST + 64
        said = "\n".join(thread_lines(stacks))  # as the console's `info threads` says it
        assert "(its stack not read: the job tells the stacks of its first threads only)" in said
        assert "outer frames not shown)" in said.split("--- worker-")[1], said[:2000]
        c.cont()
        assert c.wait_exited(WAIT)["exit_code"] == 0
    code, out, err = job.finish()
    assert code == 0 and out.strip() == "end", (out, err)
