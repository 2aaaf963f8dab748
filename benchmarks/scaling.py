"""2. Scaling: the default watch's per-step cost against parameter tensors and modules.

Models of N parameter tensors (N/2 tiny Linear layers in a chain) so the step itself is
small and the watch's cost shows; cost = median step time with the watch minus without.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .common import DEFAULT_WATCH, interleaved, plain, timed_steps, watch


def chain(n_tensors: int) -> nn.Module:
    return nn.Sequential(*[nn.Linear(4, 4) for _ in range(max(1, n_tensors // 2))])


def run(quick: bool) -> dict[str, Any]:
    sizes = (10, 100, 1000) if quick else (10, 100, 1000, 10000)
    rounds, steps = (1, 2) if quick else (5, 6)
    rows = {}
    for n in sizes:
        torch.manual_seed(0)
        model = chain(n)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
        x = torch.randn(2, 4)

        def step(model: nn.Module = model, opt: torch.optim.Optimizer = opt, x: torch.Tensor = x) -> None:
            opt.zero_grad(set_to_none=True)
            model(x).sum().backward()
            opt.step()

        med = interleaved({"plain": plain, "watch": watch(*DEFAULT_WATCH)}, timed_steps(step), rounds, steps)
        rows[n] = {"modules": len(list(model.modules())), "plain_ms": med["plain"] * 1e3,
                   "watch_cost_us": (med["watch"] - med["plain"]) * 1e6}
    ns = sorted(rows)
    # Linear or better: cost per tensor does not grow from the second size to the largest.
    per = [rows[n]["watch_cost_us"] / n for n in ns[1:]]
    return {"rows": rows, "cost_per_tensor_us": per, "linear_or_better": per[-1] <= per[0] * 1.5}
