"""`diff ranks` compares a model's frozen parameters too (stepdbg/agent/diff/replicas.py):
no optimizer holds them and DDP broadcasts them once, at its start, so a rank that changes
one alone (a positional table re-drawn after the wrap) parts from the others for good."""

from __future__ import annotations

import torch
from torch import nn

from stepdbg.agent.diff import replicas
from stepdbg.wire.protocol import plain
from stepdbg.wire.rank_diff import RankDiff


def test_a_frozen_parameter_that_differs_on_one_rank_is_named(session_factory):
    s = session_factory()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(6, 4), nn.Linear(4, 1))
    model[0].weight.requires_grad_(False)  # frozen: not in the optimizer
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    nn.functional.mse_loss(model(torch.tensor([1, 2, 3])), torch.randn(3, 1)).backward()
    opt.step()

    def pages() -> list[dict]:
        out, start = [], 0
        while start is not None:
            out.append(plain(replicas.replica_page(s.model, start, 1024)))
            start = out[-1]["next"]
        return out

    rank0 = pages()
    assert "0.weight" in [e["name"] for p in rank0 for e in p["entries"]]
    with torch.no_grad():
        model[0].weight[2, 1] += 1.0  # rank 1's frozen table alone
    rank1 = pages()
    d = RankDiff()
    for a, b in zip(rank0, rank1, strict=True):
        if d.feed({0: a, 1: b}) is None:
            break
    found = d.result()["first_divergence"]
    assert found is not None and (found["name"], found["what"], found["ranks"]) == ("0.weight", "parameter", [1]), \
        d.result()
