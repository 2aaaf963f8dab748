"""A forward that raises never reached its end: the step model's always-call forward hook
ran on the exception and marked the step `after_forward`, so the status (and the TUI's
header, the newcomer walk's item 10) said the job had paused after a forward that had
in fact failed. The step stays in its forward, with nothing captured of an output."""

from __future__ import annotations

import pytest
import torch
from torch import nn


class Fails(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.fail = nn.Linear(4, 1), False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fail:
            raise ValueError("boom in forward")
        return self.fc(x)


def test_a_forward_that_raises_does_not_reach_after_forward(session_factory):
    s = session_factory("nan")
    model = Fails()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(2, 4)).sum().backward()  # a first, good step (the model is known)
    opt.step()
    model.fail = True
    with pytest.raises(ValueError):
        model(torch.randn(2, 4))
    st = s.model.current
    assert st is not None and st.phase == "before_forward", st.phase
    model.fail = False
    out = model(torch.randn(2, 4))  # and the next good forward is one, as before
    assert s.model.current.phase == "after_forward" and out.shape == (2, 1)
