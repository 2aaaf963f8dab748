"""The gradient norm is measured at every step while a front end is attached, whatever the
conditions: the TUI plots it. Removing `grad_norm>200` at a pause (the lr_explode recipe)
had stopped the plot at that step while loss and LR went on (a newcomer's walk)."""

from __future__ import annotations

import torch
from torch import nn


def _steps(model: nn.Module, opt: torch.optim.Optimizer, n: int) -> None:
    for _ in range(n):
        loss = model(torch.randn(8, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_a_front_end_gets_the_grad_norm_at_every_step_without_a_condition_that_reads_it(session_factory):
    s = session_factory("step==1000")
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _steps(model, opt, 3)
    assert all(h.get("grad_norm") is None for h in s.model.history)  # nobody reads it: not measured
    s.attach()
    try:
        _steps(model, opt, 3)
    finally:
        s.detach()
    assert all(isinstance(h.get("grad_norm"), float) for h in list(s.model.history)[3:]), list(s.model.history)
