"""A parameter non-finite at a step's start that the previous update cannot have made (its
gradients and learning rate finite, the update far below the float range's edge) was written
between the steps (replay/param_writes.py). The break and the replay said "the update of the
previous step made them so" and advised a lower learning rate; a divergence, whose update
did overflow, still says so."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import WAIT
from hypothesis import given, settings
from hypothesis import strategies as st

from stepdbg.agent.replay.param_writes import written_between

FIXTURE = Path(__file__).parent / "fixtures" / "weight_written.py"


def replayed(tmp_path: Path, *args: str) -> tuple[str, dict]:
    report = tmp_path / "r.jsonl"
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "replay",
                          "--report", str(report), sys.executable, str(FIXTURE), *args],
                         capture_output=True, text=True, timeout=WAIT, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    (replay,) = [json.loads(ln) for ln in report.read_text().splitlines() if '"event": "replay"' in ln]
    return run.stderr, replay


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_a_weight_written_under_no_grad_is_not_blamed_on_the_update(tmp_path, private_runtime_dir, value):
    err, replay = replayed(tmp_path, value)
    assert "parameters 0.weight are non-finite (not by the update of step 4: its gradients were finite (norm " in err
    assert "written between the steps: a write under torch.no_grad, load_state_dict, a hook, or the device" in err
    assert "made them so" not in err and "Lower the learning rate" not in err, err
    first = replay["first_nonfinite"]
    assert first["where"] == "parameter" and first["written"].startswith("not by the update of step 4"), first
    assert replay["advice"]["cause"] == "written" and replay["reproduced"] is True, replay
    assert "a parameter already holds it (the model's state), not a transient fault" in replay["verdict"], replay


def test_a_weight_an_update_overflowed_is_still_the_updates(tmp_path, private_runtime_dir):
    script = tmp_path / "diverge.py"
    script.write_text("import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
                      "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=1e38)\n"
                      "for step in range(4):\n"
                      "    loss = nn.functional.mse_loss(model(torch.randn(32, 8) * 10), torch.randn(32, 1))\n"
                      "    opt.zero_grad()\n    loss.backward()\n    opt.step()\n")
    run = subprocess.run([sys.executable, "-m", "stepdbg", "--no-tui", "--break", "nan", "--on-break", "replay",
                          sys.executable, str(script)], capture_output=True, text=True, timeout=WAIT, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "are non-finite (the previous update made them so)" in run.stderr, run.stderr[-3000:]
    assert "divergence: " in run.stderr and "not by the update" not in run.stderr


def test_before_the_first_step_there_was_no_update():
    w = torch.tensor([1.0, math.nan])
    assert written_between([w], [], [], step=0) == "they were so before the first step: the model was built or loaded so"
    assert written_between([w], [], [], step=3) is None  # (no record of the step before: not known)
    assert written_between([w], [{"step": 2, "grad_norm": "nan", "lr": [0.1]}], []) is None
    assert written_between([w], [{"step": 2, "grad_norm": 1.0, "lr": []}], []) is None


def test_a_non_finite_optimizer_state_may_have_made_it():
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    opt = torch.optim.Adam([p], lr=1e-3)
    p.grad = torch.ones(2)
    opt.step()
    with torch.no_grad():
        p[0] = math.nan
    record = [{"step": 0, "grad_norm": 1.4, "lr": [1e-3]}]
    assert written_between([p], record, [opt]).startswith("not by the update of step 0")
    opt.state[p]["exp_avg_sq"][0] = math.inf
    assert written_between([p], record, [opt]) is None


finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=300, deadline=None)
@given(w=st.lists(finite32, min_size=1, max_size=4), g=st.lists(finite32, min_size=1, max_size=4),
       lr=st.floats(min_value=1e-8, max_value=1e38), decay=st.sampled_from([0.0, 0.01, 1.0]),
       adam=st.booleans())
def test_what_an_update_made_is_never_called_written(w, g, lr, decay, adam):
    """The invariant: wherever a real update of finite weights and gradients ends non-finite
    (an overflow), the words never say it was written between the steps."""
    n = min(len(w), len(g))
    p = torch.nn.Parameter(torch.tensor(w[:n]))
    p.grad = torch.tensor(g[:n])
    norm = float(torch.linalg.vector_norm(p.grad.double()))
    opt = (torch.optim.Adam if adam else torch.optim.SGD)([p], lr=lr, weight_decay=decay)
    try:
        opt.step()
    except RuntimeError:  # (torch refuses an lr it cannot hold in float32: no update ran)
        return
    if bool(torch.isfinite(p).all()):
        return
    assert written_between([p], [{"step": 0, "grad_norm": norm, "lr": [lr]}], [opt]) is None, (p, norm, lr)
