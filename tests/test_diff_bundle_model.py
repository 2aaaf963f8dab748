"""`stepdbg diff` of bundles whose model the script builds inline (an `nn.Sequential` in
main()): the recorded script's definitions cannot rebuild it, so the bundle's record of its
module tree does (module_tree.py; before, the diff refused it); `--model` still names the
function that builds it, as `stepdbg replay --model` takes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

SCRIPT = """
import torch, stepdbg
from torch import nn
stepdbg.watch("step==0", on_break="save")


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        loss = nn.functional.mse_loss(model(torch.randn(8, 16)), torch.randn(8, 1))
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
"""

MODELS = """
from torch import nn


def build():
    return nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))
"""


def diff(*argv: str, cwd: os.PathLike[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stepdbg", "diff", *argv], capture_output=True, text=True,
                          cwd=cwd, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)


@pytest.mark.slow
def test_bundles_of_an_inline_model_compare_with_the_model_named(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "models.py").write_text(MODELS)
    r = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)
    assert r.returncode == 0, r.stderr
    bundle = str(tmp_path / "stepdbg-step0")
    without = diff("--json", bundle, bundle, cwd=tmp_path)
    assert without.returncode == 0, without.stderr
    assert json.loads(without.stdout)["first_divergence"] is None
    named = diff("--json", "--model", "models.py:build", bundle, bundle, cwd=tmp_path)
    assert named.returncode == 0, named.stderr
    answer = json.loads(named.stdout)
    assert answer["first_divergence"] is None and answer["fingerprints"]["A"] > 5


def test_model_with_command_lines_is_one_line_and_exit_code_2(tmp_path):
    r = diff("--model", "models.py:build", "python a.py", "python b.py", cwd=tmp_path)
    assert r.returncode == 2 and "--model is for bundles" in r.stderr and "Traceback" not in r.stderr
