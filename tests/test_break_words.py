"""The words of a break, where a newcomer's walk at 80x24 found them short or wrong (issue 45)."""

from __future__ import annotations

import torch
from torch import nn


def test_a_list_of_non_finite_parameters_says_how_many_it_leaves_out(session_factory):
    """Four parameters went non-finite: the break named three as if they were all ('parameters
    head.0.weight, head.0.bias, head.2.weight are non-finite'; head.2.bias was too)."""
    s = session_factory("nan")
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(float("nan"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    opt.step()
    (brk,) = s.breaks
    assert "parameters 0.weight, 0.bias, 2.weight and 1 more are non-finite" in brk.reason, brk.reason
    assert brk.details["nonfinite_params"] == ["0.weight", "0.bias", "2.weight", "2.bias"], brk.details
