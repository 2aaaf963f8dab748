"""8. Clients polling cost the job nothing much: the step time of a served job while N
clients call `status` (or `stacks`, every thread's stack: a costly answer) as fast as
they can, against no client, in interleaved phases."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

TARGET = 1.10  # the step time with 10 clients flooding, against none

JOB = textwrap.dedent("""
    import sys, time, torch
    from torch import nn
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 64), torch.randn(32, 1)
    while True:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
""")

FLOOD = textwrap.dedent("""
    import sys, time
    from stepdbg import client
    c = client.connect(sys.argv[1])
    end = time.monotonic() + float(sys.argv[2])
    n = 0
    ask = getattr(c, sys.argv[3])
    while time.monotonic() < end:
        ask()
        n += 1
    print(n)
""")


def _steps_per_phase(c: Any, seconds: float, at_least: int = 3) -> list[float]:
    """The step times of the steps that ended in the next `seconds`, and until at least
    `at_least` steps have (a busy machine may run none in a short phase)."""
    first = c.status()["step"]
    time.sleep(seconds)
    deadline = time.monotonic() + 120
    while (last := c.status()["step"]) < first + at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    # The job goes on between the status and this call: ask for all it keeps, then pick the
    # phase's steps (asking for last - first records got none when that many more had run).
    hist = c.get_history(10_000)
    return [h["step_time"] for h in hist if first < h["step"] <= last]


def run(quick: bool, clients: int = 10, op: str = "status") -> dict[str, Any]:
    from stepdbg import client
    from stepdbg.wire import sessions

    d = tempfile.mkdtemp(prefix="stepdbg-bench-")
    os.environ["STEPDBG_RUNTIME_DIR"] = d
    script = Path(d) / "job.py"
    script.write_text(JOB)
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", "-q", sys.executable, str(script)],
                            cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    phase = 0.5 if quick else 3.0  # quick: the suite only checks that it runs
    rounds = 1 if quick else 4
    try:
        while not sessions.listing():
            if proc.poll() is not None:
                raise RuntimeError(f"the benchmark's job ended before it served (exit code {proc.returncode})")
            time.sleep(0.02)
        sid = sessions.listing()[0].id
        c = client.connect(sid)
        time.sleep(1.0 if quick else phase)  # warm-up: the job is running steps
        quiet: list[float] = []
        loaded: list[float] = []
        requests = 0
        for _ in range(rounds):
            quiet += _steps_per_phase(c, phase)
            flood = [subprocess.Popen([sys.executable, "-c", FLOOD, sid, str(phase + 1), op], cwd=root,
                                      stdout=subprocess.PIPE, text=True) for _ in range(clients)]
            time.sleep(0.2 if quick else 0.5)  # every flooding client connected
            loaded += _steps_per_phase(c, phase)
            requests += sum(int(p.communicate()[0] or 0) for p in flood)
        c.close(then="end")
        q, ld = statistics.median(quiet), statistics.median(loaded)
        return {"clients": clients, "op": op, "plain_step_ms": round(q * 1e3, 3), "flooded_step_ms": round(ld * 1e3, 3),
                "ratio": round(ld / q, 3), "requests_per_s": round(requests / (rounds * (phase + 1)), 1)}
    finally:
        proc.wait(30) if proc.poll() is None and not proc.kill() else None
        shutil.rmtree(d, ignore_errors=True)
