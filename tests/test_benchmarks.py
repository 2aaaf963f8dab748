"""The benchmarks still run (their figures are printed, never asserted)."""

import subprocess
import sys

from conftest import ROOT


def test_overhead_benchmark_quick_mode_runs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "benchmarks.overhead", "--quick", "--json", str(tmp_path / "b.json")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ratio to plain" in out.stdout and (tmp_path / "b.json").exists()
