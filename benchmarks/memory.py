"""4. Memory: peak RSS (and CUDA peak with a GPU) of a training run without stepdbg, with
the default watch, and with replay armed; each in a fresh process so peaks do not mix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = """
import json, resource, sys, torch
from benchmarks.workloads import step_fn
from stepdbg.agent.session import Session
from stepdbg.wire.agent_config import AgentConfig
mode, device, workload = sys.argv[1], sys.argv[2], sys.argv[3]
model, step = step_fn(workload, device)
params = sum(p.numel() * p.element_size() for p in model.parameters())
s = None
if mode != "plain":
    s = Session(AgentConfig(breaks=["nan", "grad_norm>1e9", "data_wait>60"], quiet=True)).start()
    s.model.armed = mode == "armed"
for _ in range({steps}):
    step()
out = {{"peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "param_bytes": params}}
if device != "cpu":
    out["cuda_peak"] = torch.cuda.max_memory_allocated()
print(json.dumps(out))
"""


def run(quick: bool, device: str = "cpu") -> dict[str, Any]:
    root = Path(__file__).resolve().parent.parent
    code = PROBE.format(steps=3 if quick else 20)
    out = {}
    for mode in ("plain", "watch") if quick else ("plain", "watch", "armed"):  # quick: the suite checks it runs
        # quick mode (the test suite) only checks that it runs: the small MLP, no transformers import
        r = subprocess.run([sys.executable, "-c", code, mode, device, "mlp" if quick else "gpt"], capture_output=True,
                           text=True, cwd=root, check=True)
        out[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    base = out["plain"]
    key = "cuda_peak" if device != "cpu" else "peak_rss"
    out["watch_extra_of_params"] = (out["watch"][key] - base[key]) / base["param_bytes"]
    if "armed" in out:
        out["armed_extra_of_params"] = (out["armed"][key] - base[key]) / base["param_bytes"]
    return out
