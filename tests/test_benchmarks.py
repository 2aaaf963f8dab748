"""The benchmarks still run end to end (their figures are printed, never asserted)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

# Quick mode, a group of benchmarks each, so that the groups run side by side in the
# parallel suite (all in one test was the suite's longest, 3.5 minutes on a busy machine).
GROUPS = {
    "overhead": ("1. step time", "1b. fused AdamW"),
    "deep,scaling": ("1c. many tensors against torch's floor", "2. default watch cost"),
    "responsiveness": ("3. responsiveness",),
    "memory,replay": ("4. memory", "5. one replay"),
    "snapshot,clients": ("6. one snapshot", "8. 10 clients"),
}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("only", list(GROUPS))
def test_benchmarks_quick_mode_runs_every_benchmark(tmp_path, only):
    out = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--only", only, "--json", str(tmp_path / "b.json")],
                         capture_output=True, text=True, cwd=ROOT, timeout=840)
    assert out.returncode == 0, out.stderr
    for heading in GROUPS[only]:
        assert heading in out.stdout
    data = json.loads((tmp_path / "b.json").read_text())
    if only == "overhead":
        assert set(data["overhead_cpu"]) >= {"mlp", "transformer", "gpt"}
    if only == "deep,scaling":
        assert data["deep_floor"]["tensors"] == 578
    if only == "responsiveness":
        assert data["responsiveness"]["status_ms"] > 0


def test_every_benchmark_is_in_a_group_the_suite_runs():
    text = (ROOT / "benchmarks" / "__main__.py").read_text()
    default = text.split('p.add_argument("--only", default="')[1].split('"')[0].split(",")
    assert sorted(default) == sorted(b for group in GROUPS for b in group.split(","))


@pytest.mark.slow
def test_hook_costs_times_every_hook_entry_in_place():
    from benchmarks import hook_costs

    costs = hook_costs.run("mlp", steps=3, blocks=1)
    assert set(costs) == set(hook_costs.MODES)
    assert {"forward", "backward", "optimizer"} <= set(costs["no condition"])
