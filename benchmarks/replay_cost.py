"""What one replay costs, against the step it replays (issue 13's target: at most 3x a
step plus detect_anomaly's own overhead), on the zoo's largest model: HF GPT-2 from a
small config (it needs transformers, a test extra)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from stepdbg.agent.session import Session
from stepdbg.wire.agent_config import AgentConfig


def _model(quick: bool) -> tuple[str, torch.nn.Module, Any] | None:
    if quick:  # the suite only checks that it runs: the char GPT, without importing transformers
        from .workloads import CharGPT

        return "char GPT (quick)", CharGPT(), torch.randint(0, 65, (2, 32))
    try:
        import transformers
    except ImportError:
        return None
    cfg = transformers.GPT2Config(n_layer=2 if quick else 4, n_embd=64 if quick else 128, n_head=4, vocab_size=256,
                                  n_positions=64)
    ids = torch.randint(0, 256, (4 if quick else 8, 64))
    return "HF GPT2LMHeadModel", transformers.GPT2LMHeadModel(cfg), ids


def _loss(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    if not hasattr(model, "config"):  # the char GPT: logits out, next-token targets
        logits = model(batch[:, :-1])
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
    return model(input_ids=batch, labels=batch).loss


def run(quick: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    made = _model(quick)
    if made is None:
        return {"skipped": "needs transformers (pip install transformers)"}
    name, model, batch = made
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rounds = 1 if quick else 10

    def step() -> float:
        t0 = time.perf_counter()
        opt.zero_grad()
        _loss(model, batch).backward()
        opt.step()
        return time.perf_counter() - t0

    def anomaly_step() -> float:
        with torch.autograd.detect_anomaly(check_nan=True):
            return step()

    s = Session(AgentConfig(breaks=["nan"], quiet=True)).start()
    s.model.armed = True

    def replay() -> float:
        opt.zero_grad()
        _loss(model, batch).backward()  # captures the inputs and the output gradient
        t0 = time.perf_counter()
        r = s.views.replay()
        assert r["first_nonfinite"] is None, r["summary"]
        return time.perf_counter() - t0

    try:
        step()  # warm up
        times: dict[str, list[float]] = {"step": [], "anomaly": [], "replay": []}
        for _ in range(rounds):  # interleaved
            times["replay"].append(replay())
            s.model.active = False
            times["step"].append(step())
            times["anomaly"].append(anomaly_step())
            s.model.active = True
    finally:
        s.stop()
    med = {k: statistics.median(v) for k, v in times.items()}
    budget = 3 * med["step"] + (med["anomaly"] - med["step"])
    return {"model": name, "step_ms": med["step"] * 1e3, "anomaly_step_ms": med["anomaly"] * 1e3,
            "replay_ms": med["replay"] * 1e3, "replay_per_step": med["replay"] / med["step"],
            "budget_ms": budget * 1e3, "within_budget": med["replay"] <= budget}
