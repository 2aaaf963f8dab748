"""The watch's cost does not grow with the number of parameter tensors: the torch ops it
dispatches in a steady-state step are counted (a TorchDispatchMode sees every op that
reaches a kernel), 10 tensors against 1,000. On a GPU each op is a launch, so this holds
the launch count too. Speed itself lives in benchmarks/ (the deep model's row)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from stepdbg.agent.measure import tensors
from stepdbg.agent.session import Session
from stepdbg.wire.agent_config import AgentConfig

DEFAULT_WATCH = ["nan", "grad_norm>1e9", "data_wait>60"]
# Metadata only: no kernel, no launch (the flat copy on the CPU views each gradient as 1-D).
VIEWS = {"view", "_unsafe_view", "alias", "unsqueeze", "as_strided", "detach"}


class CountOps(TorchDispatchMode):
    def __init__(self, views: bool) -> None:
        super().__init__()
        self.views, self.ops = views, Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if self.views or func.overloadpacket.__name__ not in VIEWS:
            self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def step_ops(n_tensors: int, watched: bool, views: bool) -> Counter:
    """The ops of one steady-state step of a chain of n_tensors/2 Linear layers (bfloat16:
    a norm per tensor converted to float32 was an op per tensor)."""
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(n_tensors // 2)]).to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(2, 4, dtype=torch.bfloat16)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        model(x).float().sum().backward()
        opt.step()

    session = Session(AgentConfig(breaks=DEFAULT_WATCH, quiet=True)).start() if watched else None
    try:
        for _ in range(3):
            step()
        with CountOps(views) as counted:
            step()
    finally:
        if session is not None:
            session.stop()
    return counted.ops


def watch_ops(n_tensors: int, views: bool) -> Counter:
    ops = step_ops(n_tensors, True, views)
    ops.subtract(step_ops(n_tensors, False, views))
    return +ops


@pytest.mark.parametrize("path", ["flat copy (CPU)", "fused norms (accelerator)"])
def test_the_watch_dispatches_as_many_ops_for_1000_tensors_as_for_10(path, monkeypatch):
    fused = path.startswith("fused")
    if fused:  # the accelerator's path, taken on the CPU: every op counted, views too
        monkeypatch.setattr(tensors, "FLAT_MIN_TENSORS", 10**9)
    else:
        monkeypatch.setattr(tensors, "FLAT_MIN_TENSORS", 2)  # (10 tensors take the flat copy too)
    few, many = watch_ops(10, views=fused), watch_ops(1000, views=fused)
    assert sum(many.values()) == sum(few.values()) <= 8, (few, many)
    assert many == few


@pytest.mark.parametrize("n_tensors", [1, 40])  # the fused norms' path and the flat copy's
def test_a_half_precision_gradient_norm_past_fp16s_range_is_not_inf(n_tensors):
    """A per-tensor norm of fp16 gradients over 65504 was an fp16 inf: a NaN/Inf break on
    finite gradients. The norms are float32 now."""
    grads = [torch.full((3,), 60000.0, dtype=torch.float16)] * n_tensors
    norm = tensors.total_norm(grads)
    expected = torch.linalg.vector_norm(torch.cat(grads).double())
    assert torch.isfinite(norm) and abs(float(norm) / float(expected) - 1) < 1e-6
