"""How a rank's pause request reaches the job's store (the many-ranks tests run it end to end)."""

from __future__ import annotations

import json
from typing import Any

import torch.distributed as dist

from stepdbg.agent.breaks import ranks as ranks_mod


class Recording:
    """A real in-process store whose calls are written down in order."""

    def __init__(self) -> None:
        self.store, self.calls = dist.HashStore(), []

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append(name)
            return getattr(self.store, name)(*args)
        return call


def test_a_pause_request_is_in_the_store_before_the_rank_goes_on(monkeypatch):
    """TCPStore's set has no answer: the rank that broke must not go on into its backward's
    all-reduce before the store holds its request, or another rank can check the store
    first, find nothing, break on its own NaN gradients a step later, and the job pauses
    at step 3 for a break at step 2 (seen once in CI under load)."""
    store = Recording()
    r = ranks_mod.Ranks()
    monkeypatch.setattr(r, "_store", lambda: store)
    monkeypatch.setattr(ranks_mod.Ranks, "rank", property(lambda self: 1))
    assert r.request_pause(2, "before_backward", "loss is nan", "nan") == 2
    assert store.calls[0] == "set" and store.calls[1:] and set(store.calls[1:]) <= {"check", "get"}
    assert json.loads(store.store.get(ranks_mod.KEY))["step"] == 2
