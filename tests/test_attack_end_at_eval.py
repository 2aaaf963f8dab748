"""The job's end asked by one client (q, end) while another client's line runs at the pause:
the end waited for the line, to its 60 s time limit (measured: a served demos/nan_log.py, an
eval of time.sleep(30), `end` from a second client: exit 3 after 31.8 s), and the line's
answer, cut at the limit, would have said 'the job is still paused, unharmed'. The end now
stops the line (as the interrupt op does) and its answer says the job is ending."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from conftest import WAIT, paused_job

from stepdbg import client

SCRIPT = """
import torch
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    x = torch.ones(4, 2) * (float("nan") if step == 2 else 1.0)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def a_line_running(c: Any, tmp_path: Path) -> tuple[threading.Thread, list[dict]]:
    """A client's line that runs at the pause until the job ends (its thread, its answer once it comes)."""
    ready, answers = tmp_path / "running", []
    code = f"open({str(ready)!r}, 'w').close(); import time; time.sleep({WAIT})"
    asking = threading.Thread(target=lambda: answers.append(c.eval(code)), daemon=True)
    asking.start()
    deadline = time.monotonic() + WAIT
    while not ready.exists():  # (the line runs: a guard against a hang, never a measure)
        assert time.monotonic() < deadline, "the line never ran"
        time.sleep(0.05)
    return asking, answers


def test_the_end_stops_a_line_running_at_the_pause(start_job, tmp_path, private_runtime_dir):
    with paused_job(start_job, tmp_path, SCRIPT, "--break", "nan") as (job, c):
        asking, answers = a_line_running(c, tmp_path)
        with client.connect() as other:
            other.call("end", by="console")
        asking.join(WAIT)
        assert answers, "no answer"
        assert answers[0]["error"] == "the job is ending: the line did not finish", answers
        exited = c.wait_exited(WAIT)
    code, _, err = job.finish()
    assert code == 3, err
    assert exited is not None and exited.get("exit_code") == 3, exited
    assert "ending the job (exit code 3) as asked by a console (q or end)" in err, err
