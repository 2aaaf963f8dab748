"""`diff ranks`' agent side: this rank's parameters and gradients as fingerprints (the
`replicas` op), for a client to compare with every other rank's (stepdbg/wire/rank_diff.py).

Parameters first, in parameter order (the optimizers' order, else the models'), then their
gradients in the same order; then the models' parameters no optimizer holds (frozen ones,
which DDP broadcasts once at its start and never again: a rank that changes one alone parts
for good) and their gradients, if any: a parameter that differs is a cause, a gradient that differs
while every parameter agrees says the all-reduce did not make them the same. A page of at
most `limit` tensors and about PAGE_VALUES values is fingerprinted at a time (fingerprint.py:
a few hundred bytes each, read a chunk at a time, no copy of a whole tensor), so an answer
stays small and comes within seconds whatever the model's size, the client can say its
progress, and it stops at the first page that differs.

Only reads, on this rank alone: no collective, no gradient recorded, nothing changed. A
model whose parameters are sharded (FSDP, FSDP2's DTensors) holds no replicas: that is
said (`sharded`) and nothing is read; a tensor this rank cannot read in place (a tensor
subclass, freed storage) is fingerprinted as its shape and dtype, `unreadable`.
"""

from __future__ import annotations

from typing import Any

import torch

from stepdbg.agent.diff.fingerprint import fingerprint
from stepdbg.agent.measure.tensors import readable, sharded_across_ranks
from stepdbg.agent.step.step_model import StepModel

PAGE_VALUES = 1 << 24  # values a page reads (after its first tensor): about 2 s of a 2-core CPU, then the client
#                        hears back (progress; the first page that differs ends the walk)
NO_SYNC = ("DDP's no_sync() is on: this micro-batch's gradients are each rank's own until the backward "
           "that syncs them (compare them at before_optimizer_step)")


MID_ACCUMULATION = ("the step's gradients are mid-accumulation (a backward of this step is done, this micro-batch's "
                    "is not): under DDP's no_sync() each rank's are its own until the backward that syncs them "
                    "(compare them at after_backward of the last micro-batch or before_optimizer_step)")
BEFORE_BACKWARD = ("before_forward", "after_forward", "before_backward")


def replica_page(model: StepModel, start: int, limit: int, phase: str | None = None) -> dict[str, Any]:
    """Fingerprints of this rank's parameters and gradients from `start`, at most `limit` of
    them and about PAGE_VALUES values: `entries` ({name, what: parameter or gradient, fp}),
    `total`, `next` (the next page's start, or None), `values` and `total_values` (read for
    this page, and for all), `sharded` (why these are not replicas, or None), `grads_local`
    (why the gradients are not the same on every rank at this pause `phase`, or None)."""
    roots = list(model.roots.values())
    sharded = next((why for r in roots if (why := sharded_across_ranks(r))), None)
    listing = _tensors(model)
    out: dict[str, Any] = {"total": len(listing), "start": start, "sharded": sharded,
                           "grads_local": _grads_local(model, roots, phase), "entries": [], "next": None}
    if sharded:
        return out
    end, values = start, 0
    while end < len(listing) and end - start < limit and values < PAGE_VALUES:
        values += listing[end][3]
        end += 1
    out["entries"] = [{"name": name, "what": what, "fp": _fingerprint(t)} for name, what, t, _ in listing[start:end]]
    out["next"] = end if end < len(listing) else None
    out["values"] = values  # read for this page (a parameter's count for its gradient, present or not)
    out["total_values"] = sum(n for *_, n in listing)
    return out


def _tensors(model: StepModel) -> list[tuple[str, str, torch.Tensor | None, int]]:
    """(name, parameter or gradient, tensor or None, the parameter's values) of every
    parameter the step updates, then every gradient of them; then the models' other
    parameters (frozen) and their gradients. A page ends by the parameters' sizes, which
    replicas share, so every rank's page ends at the same tensor."""
    seen: dict[int, torch.nn.Parameter] = {}
    for p in model.params_of_step():
        seen.setdefault(id(p), p)
    trained = len(seen)
    for root in list(model.roots.values()):  # frozen: DDP never syncs them after it starts
        for p in root.parameters():
            seen.setdefault(id(p), p)
    names = model.param_names()
    named = [(names.get(id(p), f"param#{i}"), p) for i, p in enumerate(seen.values())]
    out: list[tuple[str, str, torch.Tensor | None, int]] = []
    for group in (named[:trained], named[trained:]):
        out += [(n, "parameter", p, p.numel()) for n, p in group]
        out += [(f"{n}.grad", "gradient", p.grad, p.numel()) for n, p in group]
    return out


def _fingerprint(t: torch.Tensor | None) -> dict[str, Any]:
    if t is None or readable(t):
        return fingerprint(t)
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
            "unreadable": f"a {type(t).__name__} this rank cannot read in place"}


def _grads_local(model: StepModel, roots: list[torch.nn.Module], phase: str | None) -> str | None:
    """Why this rank's gradients need not be the other ranks' at this pause, or None: inside
    DDP's no_sync(); or after a backward of this step and before the next one (gradient
    accumulation: the micro-batches before the last ran under no_sync(), the usual way, so
    the last one's forward, outside it, holds their local sums)."""
    if _no_sync(roots):
        return NO_SYNC
    st = model.current
    done = (st.backward_calls - (phase == "before_backward")) if st is not None else 0  # (counted before its pause)
    if phase in BEFORE_BACKWARD and done > 0:
        return MID_ACCUMULATION
    return None


def _no_sync(roots: list[torch.nn.Module]) -> bool:
    """A DDP model inside its no_sync(): the backward just run did not all-reduce."""
    return any(type(m).__name__ == "DistributedDataParallel" and not getattr(m, "require_backward_grad_sync", True)
               for r in roots for m in r.modules())
