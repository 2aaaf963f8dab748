"""`diff ranks`' walk over pages (stepdbg/wire/rank_diff.py) where the pages are not one
moment or not whole: a rank that left its pause between pages (another client continued the
job) ends the walk with that said, not with a later step's tensors under the first page's
step; a tensor a rank could not read (a meta parameter) is said, not counted as agreeing
bitwise; -0.0 against 0.0 at a sampled value is not said to be between the samples."""

from __future__ import annotations

import torch

from stepdbg.agent.diff.replicas import _fingerprint
from stepdbg.wire.protocol import plain
from stepdbg.wire.rank_diff import RankDiff

W = torch.linspace(-1, 1, 64).reshape(8, 8)
G = torch.linspace(0, 0.5, 64).reshape(8, 8)


def entry(name: str, what: str, t: torch.Tensor) -> dict:
    return {"name": name, "what": what, "fp": _fingerprint(t)}


def page(entries: list[dict], *, start: int = 0, nxt: int | None = None, step: int = 5, at: float = 1.0) -> dict:
    return plain({"step": step, "phase": "after_backward", "paused_at": at, "world_size": 2, "total": 2,
                  "sharded": None, "grads_local": None, "start": start, "next": nxt, "entries": entries,
                  "values": 64, "total_values": 128})


def test_a_rank_that_left_its_pause_between_pages_ends_the_walk_and_says_so():
    d = RankDiff()
    first = page([entry("fc.weight", "parameter", W)], nxt=1)
    assert d.feed({0: first, 1: first}) == 1
    # Another client continued the job: both ranks paused again, at step 6, where rank 1's gradient differs.
    later = {r: page([entry("fc.weight.grad", "gradient", G if r == 0 else G + 1)], start=1, step=6, at=2.0)
             for r in (0, 1)}
    assert d.feed(later) is None
    r = d.result()
    assert r["first_divergence"] is None and r["moved"], r
    assert r["summary"] == ("step 5 (after_backward): 1 of 2 tensors agree, then the job moved on between pages "
                            "(ranks 0 and 1: rank 0 now at step 6 after_backward): the rest was not compared"), r["summary"]


def test_a_tensor_no_rank_could_read_is_said_not_counted_as_bitwise_equal():
    meta = torch.nn.Parameter(torch.empty(8, 8, device="meta"))
    one = page([entry("fc.weight", "parameter", W), entry("lazy.weight", "parameter", meta)])
    r = RankDiff()
    assert r.feed({0: one, 1: one}) is None
    out = r.result()
    assert out["first_divergence"] is None
    assert out["summary"].endswith("; 1 tensor could not be read on a rank and was compared by shape and dtype "
                                   "alone (lazy.weight: a Parameter this rank cannot read in place)"), out["summary"]


def test_minus_zero_against_zero_at_a_sample_is_not_said_to_lie_between_the_samples():
    a, b = W.clone(), W.clone()
    a[0, 0], b[0, 0] = 0.0, -0.0  # position 0 is sampled
    r = RankDiff()
    r.feed({0: page([entry("fc.weight", "parameter", a)]), 1: page([entry("fc.weight", "parameter", b)])})
    s = r.result()["summary"]
    assert "rank 1 differs from rank 0: the bytes differ" in s and "-0.0 and 0.0" in s, s
