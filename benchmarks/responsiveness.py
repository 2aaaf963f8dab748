"""3. Responsiveness, through a real served job and the real client."""

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

TARGETS = {"pause_ms": 50, "status_ms": 2, "module_tree_ms": 200, "attach_ms": 1000}

JOB = textwrap.dedent("""
    import time, torch
    from torch import nn
    big = torch.randn(10_000_000)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(2, 2), nn.ReLU()) for _ in range({modules} // 3)])
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    x = torch.randn(1, 2)
    for step in range(1000000):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        time.sleep(0.001)
""")


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def run(quick: bool) -> dict[str, Any]:
    from stepdbg import client
    from stepdbg.wire import sessions

    modules = 300 if quick else 10_000
    d = tempfile.mkdtemp(prefix="stepdbg-bench-")
    os.environ["STEPDBG_RUNTIME_DIR"] = d
    script = Path(d) / "job.py"
    script.write_text(JOB.format(modules=modules))
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-m", "stepdbg", "serve", "-q", "--break", "step==20", sys.executable,
                             str(script)], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not sessions.listing():
            if proc.poll() is not None:
                raise RuntimeError(f"the benchmark's job ended before it served (exit code {proc.returncode})")
            time.sleep(0.02)
        t0 = time.perf_counter()
        c = client.connect()
        c.status()
        attach = time.perf_counter() - t0
        brk = c.wait_paused(120)
        pause_latency = time.time() - brk["at"]  # break record made -> event here (upper bound)
        n = 20 if quick else 200
        status = []
        for _ in range(n):
            t = time.perf_counter()
            c.status()
            status.append(time.perf_counter() - t)
        t = time.perf_counter()
        c.summary("big")
        summary = time.perf_counter() - t
        t = time.perf_counter()
        tree = c.module_tree()
        tree_time = time.perf_counter() - t
        hist = c.get_history(50)
        step_time = statistics.median(h["step_time"] for h in hist)
        t = time.perf_counter()
        c.replay()
        replay = time.perf_counter() - t
        c.close(then="end")
        return {
            "pause_ms": _ms(pause_latency), "status_ms": _ms(statistics.median(status)),
            "summary_10M_ms": _ms(summary), "module_tree_ms": _ms(tree_time), "modules": len(tree),
            "attach_ms": _ms(attach), "replay_x_step": round(replay / step_time, 1),
        }
    finally:
        proc.wait(30) if proc.poll() is None and not proc.kill() else None
        shutil.rmtree(d, ignore_errors=True)
