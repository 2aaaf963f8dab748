"""`diff ranks`' comparison (stepdbg/wire/rank_diff.py) on real fingerprints of real tensors,
in the shapes the `replicas` op answers: which tensor, which ranks, and what is not compared.
(tests/test_ranks_diff.py runs it end to end on torchrun jobs.)"""

from __future__ import annotations

import pytest
import torch

from stepdbg.agent.diff.fingerprint import fingerprint
from stepdbg.wire.rank_diff import RankDiff, tolerances

W = torch.linspace(-1, 1, 64).reshape(8, 8)
G = torch.linspace(0, 0.5, 64).reshape(8, 8)


def page(w: torch.Tensor = W, g: torch.Tensor | None = G, *, nxt: int | None = None, **more) -> dict:
    """One rank's answer: a weight and its gradient, in the order the agent sends them."""
    return {"step": 5, "phase": "before_optimizer_step", "world_size": 4, "total": 2, "sharded": None,
            "grads_local": None, "next": nxt, **more,
            "entries": [{"name": "fc.weight", "what": "parameter", "fp": fingerprint(w)},
                        {"name": "fc.weight.grad", "what": "gradient", "fp": fingerprint(g)}]}


def bumped(t: torch.Tensor, by: float) -> torch.Tensor:
    t = t.clone()
    t[0, 0] += by
    return t


def run(pages: dict[int, dict], atol: float = 0.0, rtol: float = 0.0) -> dict:
    d = RankDiff(atol, rtol)
    assert d.feed(pages) is None
    return d.result()


def test_a_gradient_that_differs_on_one_rank_of_four_is_named_with_that_rank():
    r = run({0: page(), 1: page(), 2: page(g=bumped(G, 1e-3)), 3: page()})
    d = r["first_divergence"]
    assert (d["name"], d["what"], d["ranks"], d["reference"], d["majority"]) == (
        "fc.weight.grad", "gradient", [2], [0, 1, 3], True), d
    assert r["summary"].startswith("step 5 (before_optimizer_step): fc.weight.grad (gradient) is the first whose "
                                   "replicas differ: rank 2 differs from ranks 0, 1 and 3: the bytes differ; max |rank 2 "
                                   "- rank 0| 0.001"), r["summary"]
    assert "no value is held by most ranks" not in r["summary"]


def test_the_parameter_comes_before_its_gradient_and_two_odd_values_are_said():
    r = run({0: page(w=bumped(W, 1.0), g=bumped(G, 1.0)), 1: page(), 2: page(w=bumped(W, 2.0)), 3: page()})
    d = r["first_divergence"]
    assert (d["name"], d["ranks"], d["groups"]) == ("fc.weight", [0, 2], [[1, 3], [0], [2]]), d
    assert "ranks 0 and 2 differ from ranks 1 and 3 and from each other" in d["summary"], d["summary"]


def test_a_tolerance_lets_a_small_difference_agree_and_says_how_far_past_it_a_larger_one_is():
    pages = {0: page(), 1: page(w=bumped(W, 1e-6)), 2: page(), 3: page()}
    assert run(pages)["first_divergence"]["ranks"] == [1]
    r = run(pages, atol=1e-5)
    assert r["first_divergence"] is None and r["summary"] == (
        "step 5 (before_optimizer_step): all 4 ranks hold the same parameters and gradients: 2 tensors compared on "
        "each, within atol 1e-05, rtol 0"), r
    far = run({0: page(), 1: page(w=bumped(W, 1e-3)), 2: page(), 3: page()}, atol=1e-5)
    assert far["first_divergence"]["past_tolerance"] == pytest.approx(100, rel=1e-2), far
    assert ", 100x the tolerance" in far["summary"], far["summary"]


def test_gradients_under_no_sync_are_not_compared_and_no_gradients_yet_is_said():
    local = "DDP's no_sync() is on: this micro-batch's gradients are each rank's own"
    r = run({0: page(), 1: page(g=bumped(G, 1.0), grads_local=local), 2: page(), 3: page()})
    assert r["first_divergence"] is None and (r["compared"], r["gradients"]) == (1, 0), r
    assert f"all 4 ranks hold the same parameters (gradients not compared: {local}): 1 tensor compared" in r["summary"]
    r = run({rank: page(g=None) for rank in range(4)})
    assert "all 4 ranks hold the same parameters (no gradients yet): 1 tensor compared on each, bitwise" in r["summary"]
    r = run({0: page(g=None), 1: page(), 2: page(g=None), 3: page(g=None)})
    assert (r["first_divergence"]["name"], r["first_divergence"]["ranks"]) == ("fc.weight.grad", [1]), r


def test_what_is_not_compared_is_said_in_one_line():
    shards = "its parameters are sharded DTensors (FSDP2)"
    r = run({0: page(sharded=shards), 1: page(sharded=shards)})
    assert r["summary"] == (f"nothing compared: {shards}, so each rank holds its own shard, not a replica (diff ranks "
                            "compares the replicas of DDP-style data parallelism)") and r["compared"] == 0, r
    r = run({0: {**page(), "total": 0, "entries": []}, 1: {**page(), "total": 0, "entries": []}})
    assert r["summary"].startswith("nothing compared: no rank knows its model's parameters yet"), r
    r = run({0: page(), 1: page(phase="after_backward")})
    assert r["summary"] == ("nothing compared: the ranks are paused at different points (rank 0 at step 5 "
                            "before_optimizer_step, rank 1 at step 5 after_backward)"), r


def test_ranks_that_hold_other_parameters_or_more_of_them_and_a_rank_gone():
    other = page()
    other["entries"][0]["name"] = "head.weight"
    r = run({0: page(), 1: page(), 2: other})
    assert r["first_divergence"]["what"] == "structure" and r["summary"] == (
        "step 5 (before_optimizer_step): the ranks hold different parameters: rank 2 holds head.weight (parameter) "
        "where ranks 0 and 1 hold fc.weight (parameter) (only ranks 0, 1 and 2 of the job's 4 answered: the others are "
        "gone)"), r
    d = RankDiff()
    assert d.feed({0: page(nxt=2), 1: page(nxt=2)}) == 2  # the next page, from every rank
    assert d.feed({0: page(), 1: page(nxt=4)}) is None
    assert "rank 1 holds more parameters than the others" in d.result()["summary"]


def test_tolerances_are_typed_as_stepdbg_diff_takes_them():
    assert tolerances([]) == (0.0, 0.0)
    assert tolerances(["--atol", "1e-6", "--rtol=1e-5"]) == (1e-6, 1e-5)
    for words, said in ((["--atol", "-1"], "--atol needs a number >= 0 (e.g. 1e-6), not '-1'"),
                        (["--rtol", "inf"], "--rtol needs a number >= 0 (e.g. 1e-6), not 'inf'"),
                        (["--atol"], "--atol needs a number >= 0 (e.g. 1e-6)"),
                        (["--json"], "diff ranks [--atol X] [--rtol Y]: '--json'?")):
        with pytest.raises(ValueError) as e:
            tolerances(words)
        assert str(e.value) == said


def test_pages_that_end_at_other_tensors_are_compared_as_far_as_every_rank_sent():
    d = RankDiff()
    short = page(nxt=1)
    short["entries"] = short["entries"][:1]
    assert d.feed({0: short, 1: page(nxt=2)}) == 1  # rank 1's second tensor is asked again, with rank 0's
    assert d.walked == 1 and d.progress().startswith("1 of 2 parameters and gradients compared on every rank")


def test_the_agents_pages_end_by_values_read_and_read_only(session_factory, monkeypatch):
    """One step of a real model under an in-process agent: the `replicas` op's pages (the
    agent's own function) end after PAGE_VALUES values, hold the fingerprints `stepdbg diff`
    takes of the same tensors, and change nothing; two such answers agree."""
    from torch import nn

    from stepdbg.agent.diff import replicas

    s = session_factory()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    nn.functional.mse_loss(model(torch.randn(8, 4)), torch.randn(8, 1)).backward()
    opt.step()
    before = [t.clone() for p in model.parameters() for t in (p, p.grad)]
    monkeypatch.setattr(replicas, "PAGE_VALUES", 40)  # the first weight (32) and its bias (8), then a page more
    first = replicas.replica_page(s.model, 0, 1024)
    assert ([e["name"] for e in first["entries"]], first["next"], first["total"]) == (["0.weight", "0.bias"], 2, 8)
    assert first["entries"][0]["fp"] == fingerprint(model[0].weight)
    rest = replicas.replica_page(s.model, 2, 1024)
    assert [e["name"] for e in rest["entries"]] == ["2.weight", "2.bias", "0.weight.grad"]  # 8 + 1 + 32 values
    assert rest["next"] == 5 and (first["values"], rest["values"], rest["total_values"]) == (40, 41, 98)
    assert all(torch.equal(a, b) for a, b in zip(before, [t for p in model.parameters() for t in (p, p.grad)],
                                                   strict=True))
    d = RankDiff()
    start = 0
    while start is not None:
        start = d.feed({r: replicas.replica_page(s.model, start, 1024) for r in (0, 1)})
    assert d.result()["first_divergence"] is None and (d.compared, d.gradients) == (8, 4), d.result()
