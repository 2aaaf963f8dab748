"""The benchmarks still run end to end (their figures are printed, never asserted)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT


# Quick mode takes about a minute alone and several on a busy machine: its own limit, not the suite's.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_benchmarks_quick_mode_runs_every_benchmark(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--json", str(tmp_path / "b.json")],
                         capture_output=True, text=True, cwd=ROOT, timeout=840)
    assert out.returncode == 0, out.stderr
    for heading in ("1. step time", "1b. fused AdamW", "2. default watch cost", "3. responsiveness", "4. memory", "6. one snapshot",
                    "8. 10 clients"):
        assert heading in out.stdout
    data = json.loads((tmp_path / "b.json").read_text())
    assert set(data["overhead_cpu"]) >= {"mlp", "transformer", "gpt"}
    assert data["responsiveness"]["status_ms"] > 0


def test_hook_costs_times_every_hook_entry_in_place():
    from benchmarks import hook_costs

    costs = hook_costs.run("mlp", steps=3, blocks=1)
    assert set(costs) == set(hook_costs.MODES)
    assert {"forward", "backward", "optimizer"} <= set(costs["no condition"])
