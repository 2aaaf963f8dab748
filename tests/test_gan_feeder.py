"""A NaN break at netD's loss names the generator only where a generator's output holds
the NaN (step/upstream.py: feeder): not when netG's finite output sits in a torch.cat beside
real data that holds it, nor when the program's own log between the models made it; the
generator that made it of two; and a `fake.detach().clone()` (no storage or graph shared)."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn


class Gen(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.bad = nn.Linear(3, 5), False

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(self.fc(z))
        return y * float("nan") if self.bad else y


@pytest.mark.parametrize(("case", "fed_by"), [("nan_in_real", None), ("log_between", None),
                                              ("second_generator", "netG2"), ("detached_clone", "netG")])
def test_the_nan_break_names_the_generator_whose_output_holds_the_nan(session_factory, tmp_path, case, fed_by):
    report = tmp_path / "r.jsonl"
    s = session_factory("nan", report=str(report))
    torch.manual_seed(0)
    netG, netG2, netD = Gen(), Gen(), nn.Linear(5, 1)
    opt_d = torch.optim.SGD(netD.parameters(), lr=0.01)
    for step in range(3):
        netG2.bad, netG.bad = step == 2 and case == "second_generator", step == 2 and case == "detached_clone"
        real = torch.randn(4, 5)
        if step == 2 and case == "nan_in_real":
            real[0, 0] = float("nan")
        fake, fake2 = netG(torch.randn(4, 3)), netG2(torch.randn(4, 3))
        if case == "detached_clone":
            inputs = fake.detach().clone()
        elif case == "log_between":
            inputs = torch.log(fake + (-2 if step == 2 else 2))
        else:
            inputs = torch.cat([real, fake, fake2])
        opt_d.zero_grad()
        nn.functional.binary_cross_entropy_with_logits(netD(inputs), torch.zeros(len(inputs), 1)).backward()
        opt_d.step()
    s.stop()
    (brk,) = [r for r in map(json.loads, report.read_text().splitlines()) if r.get("event") == "break"]
    assert brk["details"].get("fed_by") == fed_by, brk
    if fed_by:
        assert f"it is {fed_by}'s output, born in {fed_by}'s forward" in brk["reason"], brk
    else:
        assert "came with the data" in brk["reason"] and "netG" not in brk["reason"], brk
