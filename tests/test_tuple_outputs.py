"""A model that returns several tensors ((features, logits), an aux loss beside the logits):
the gradient kept for the replay's backward is the one of the output the loss reached (the
first tensor's was kept: for (features, logits) with the loss on the logits, none, and a
NaN born in the head's backward was said to be "born in the loss"). Live and offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import marked_line, run_stepdbg
from test_bundle_trust import replay_here

SCRIPT = '''\
import sys
import torch
from torch import nn

AUX = "--aux" in sys.argv


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.scale = nn.Parameter(torch.ones(8))

    def forward(self, x):
        features = torch.relu(self.body(x))
        logits = torch.sqrt(self.scale * features).sum(1, keepdim=True)  # its gradient at 0 is 1/0 @sqrt
        return features, logits


def main():
    torch.manual_seed(0)
    model = TwoHeads()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(4):
        x, y = torch.rand(16, 6) + 0.5, torch.randn(16, 1)
        features, logits = model(x)
        loss = nn.functional.mse_loss(logits, y)
        if AUX:
            loss = loss + 1e-3 * features.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
'''


def _run(tmp_path: Path, *args: str) -> tuple[dict, Path, Path]:
    script = tmp_path / "two_heads.py"
    script.write_text(SCRIPT)
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", "--on-break", "save",
                      "--on-break", "skip", "--bundle-dir", str(tmp_path), script_args=(str(script), *args))
    assert run.returncode == 0, run.stderr[-2000:]
    return run.of("replay")[0], Path(next(e for e in run.of("bundle") if e["saved"])["path"]), script


def test_the_backward_is_replayed_from_the_output_the_loss_reached(tmp_path, capsys, monkeypatch):
    replay, path, script = _run(tmp_path)
    first = replay["first_nonfinite"]
    # relu makes exact zeros: sqrt(0)'s gradient is inf, times 0 (relu's) is NaN in body's gradient
    assert (first["where"], first["op"], first["line"]) == ("backward", "sqrt", marked_line(script, "sqrt")), \
        replay["summary"]
    assert replay["reproduced"] is True and "reached" not in replay["summary"], replay["summary"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = replay_here(path, capsys, "--json")
    offline = json.loads(out)
    assert code == 0 and offline["first_nonfinite"]["op"] == "sqrt" and offline["reproduced"] is True, (out, err)


def test_two_outputs_that_reach_the_loss_are_said(tmp_path):
    replay, _, script = _run(tmp_path, "--aux")
    assert (replay["first_nonfinite"]["where"], replay["first_nonfinite"]["line"]) == \
        ("backward", marked_line(script, "sqrt")), replay["summary"]
    assert "the loss reached the model's outputs 0 and 1: the backward is replayed from output 1's gradient only" \
        in replay.get("notes", []), replay


SHAPES = '''\
import sys
import torch
from torch import nn
import torch.nn.functional as F

CASE = sys.argv[1]


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 8)
        self.head = nn.Linear(8, 3)
        self.scale = nn.Parameter(torch.ones(8))
        self.extra = nn.Parameter(torch.ones(3))

    def forward(self, x):
        features = torch.relu(self.body(x))
        if CASE == "aux_path":
            return self.head(features), torch.sqrt(self.scale * features).mean()  # @aux-sqrt
        logits = self.head(torch.sqrt(self.scale * features))  # @head-sqrt
        if CASE == "aux_inside":
            return logits, features.pow(2).mean()
        if CASE == "leaf":
            return self.extra, logits
        return [features, features * 2, features + 1, features.mean(1), logits]


torch.manual_seed(0)
model = M()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x, y = torch.rand(16, 6) + 0.5, torch.randint(0, 3, (16,))
    out = model(x)
    if CASE in ("aux_inside", "aux_path"):
        loss = F.cross_entropy(out[0], y) + 0.1 * out[1]
    elif CASE == "leaf":
        loss = F.cross_entropy(out[1] * out[0], y)
    else:
        loss = F.cross_entropy(out[-1], y)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


@pytest.mark.parametrize("case", ["aux_inside", "leaf", "five"])
def test_the_output_the_backward_starts_from_is_the_one_the_loss_reached(tmp_path, case):
    """The tuple attacker's shapes: (logits, aux) with the aux made inside the model, whose
    node the backward reaches first (f4ae76a took its gradient: 'transient fault'); a
    parameter returned beside the logits; the logits 5th of 5 (4 were watched)."""
    script = tmp_path / "shapes.py"
    script.write_text(SHAPES)
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", script_args=(str(script), case))
    replay = run.of("replay")[0]
    first = replay["first_nonfinite"] or {}
    assert (first.get("where"), first.get("op"), first.get("line")) == \
        ("backward", "sqrt", marked_line(script, "head-sqrt")), replay["summary"]


def test_a_nan_on_the_aux_path_not_replayed_is_could_not_tell_not_a_transient_fault(tmp_path, capsys, monkeypatch):
    script = tmp_path / "shapes.py"
    script.write_text(SHAPES)
    run = run_stepdbg(tmp_path, "--no-tui", "--break", "nan", "--on-break", "replay", "--on-break", "save",
                      "--bundle-dir", str(tmp_path), script_args=(str(script), "aux_path"))
    replay = run.of("replay")[0]
    assert replay["reproduced"] is None and replay["verdict"].startswith(
        "could not tell: the loss reached several of the model's outputs"), replay
    monkeypatch.chdir(tmp_path)
    code, out, err = replay_here(Path(next(e for e in run.of("bundle") if e["saved"])["path"]), capsys, "--json")
    assert code == 0 and json.loads(out)["verdict"].startswith("could not tell: the loss reached several"), (out, err)
