"""python -m benchmarks.startup [--rounds N]: what `stepdbg` adds to a job's start and end.

A trivial torch script (import torch, three SGD steps on a Linear) runs as `python
script.py` and as `stepdbg -q python script.py` (headless), interleaved (plain, stepdbg,
plain, stepdbg, ...) so both see the same machine. Per run: wall seconds to the script's
first line after `import torch`, wall seconds to exit, and CPU seconds (user + system, every process of the
run). Printed as medians and as ratios to plain; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import table

SCRIPT = """\
import time
import torch
ready = time.time()
m = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(3):
    loss = m(torch.randn(8, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(ready)
"""


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(cmd: list[str]) -> dict[str, float]:
    """Seconds to the script's line after `import torch`, to its exit, and CPU seconds of the run."""
    cpu0, t0 = _children_cpu(), time.time()
    out = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    t1, cpu1 = time.time(), _children_cpu()
    ready = float(out.stdout.split()[-1])
    return {"to_torch_imported": ready - t0, "total": t1 - t0, "cpu": cpu1 - cpu0}


def run(rounds: int) -> dict[str, dict[str, float]]:
    stepdbg = str(Path(sys.executable).with_name("stepdbg"))
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "trivial.py")
        Path(script).write_text(SCRIPT)
        variants = {"plain": [sys.executable, script], "stepdbg": [stepdbg, "-q", sys.executable, script]}
        times: dict[str, list[dict[str, float]]] = {k: [] for k in variants}
        for cmd in variants.values():  # warm the file cache
            one_run(cmd)
        for _ in range(rounds):
            for name, cmd in variants.items():
                times[name].append(one_run(cmd))
    return {k: {m: statistics.median(r[m] for r in v) for m in ("to_torch_imported", "total", "cpu")}
            for k, v in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    r = run(p.parse_args().rounds)
    plain, sd = r["plain"], r["stepdbg"]
    rows = [[m, f"{plain[m]:.3f}", f"{sd[m]:.3f}", f"{sd[m] - plain[m]:+.3f}", f"{sd[m] / plain[m]:.2f}x"]
            for m in ("to_torch_imported", "total", "cpu")]
    print("start-up: a trivial torch script, plain against stepdbg -q (medians of interleaved runs, seconds)")
    print(table(rows, ["measure", "plain", "stepdbg", "added", "ratio"]))


if __name__ == "__main__":
    main()
