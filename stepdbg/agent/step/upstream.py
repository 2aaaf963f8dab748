"""The last forward of every other model of the program, kept for the replay: a GAN's
discriminator is fed the generator's output (`netD(fake.detach())`), so a NaN in its input
may be born in the generator's forward, not in the data. The capture holds one forward, the
latest; before the next root's forward overwrites it, the one it held is kept here, under
its root, when that root is another model: its inputs and RNG state (references, as the
capture holds them) and its output, weakly (only to tell whether a later input is it).
"""

from __future__ import annotations

import contextlib
import weakref
from collections import deque
from typing import Any

import torch

from stepdbg.agent.measure import tensors

NODES = 10_000  # autograd nodes walked at most to tell whether an input was computed from an output
KEPT = ("root", "args", "kwargs", "rng", "kernels", "buffers", "called_from", "step")


def alive(ref: Any) -> Any:
    """What the weak reference `ref` refers to; None when it died or `ref` is not one."""
    return ref() if isinstance(ref, weakref.ReferenceType) else None


def kept(cap: dict[str, Any], module: Any) -> dict[str, Any]:
    """`cap`, the StepModel's capture, about to take `module`'s forward: the forward it
    holds is kept in cap["upstream"] (by its root's id) when its root is another model."""
    ref = cap.get("root")
    prev = alive(ref)
    if prev is None or prev is module or cap.get("args") is None:
        return cap
    out = cap.get("output")
    out = out() if isinstance(out, weakref.ReferenceType) else tensors.first_tensor(out)
    record = {k: cap.get(k) for k in KEPT}
    record["output"] = record["storage"] = None
    if out is not None:
        with contextlib.suppress(TypeError, RuntimeError):  # (a tensor without storage: a subclass, a meta one)
            record["output"] = weakref.ref(out)
            # Its storage, weakly too: `netD(netG(z).detach())` frees the output and keeps only
            # an alias of its storage, which lives on (torch keeps a storage's Python object with it).
            record["storage"] = weakref.ref(out.untyped_storage())
    cap.setdefault("upstream", {})[id(prev)] = record
    return cap


def feeder(cap: dict[str, Any], bad: list[torch.Tensor], by_storage: bool = False) -> Any:
    """The root module of another model whose kept forward's output is non-finite and one of
    `bad` (the captured forward's non-finite inputs) is it, came from it, or is a copy of it
    (`fake.detach().clone()`: the same values); None: the data's. A finite output did not
    make the NaN (real data with a NaN beside it in a torch.cat, a log of it taken between
    the models, another generator's output in the same batch). `by_storage`: instead, the
    model whose output was freed and one of `bad` holds its memory (`netD(netG(z).detach())`),
    which the program may have written since: only a replay of that model tells."""
    for record in list((cap.get("upstream") or {}).values()):
        root = alive(record.get("root"))
        if root is not None and any(record_feeds(record, t, nonfinite=True) == ("storage" if by_storage else "output")
                                    for t in bad):
            return root
    return None


def record_feeds(record: dict[str, Any], held: torch.Tensor, nonfinite: bool = False) -> str | None:
    """"output": `held` is (or came from, or copies) the output of the forward `record`
    kept, a non-finite one with `nonfinite`; "storage": that output was freed and `held`
    holds its memory (an alias: `.detach()`, a view), whose values then are not known to be
    the output's; None: neither."""
    out = alive(record.get("output"))
    if out is not None:
        if nonfinite and (not out.is_floating_point() or tensors.all_finite(out)):
            return None
        return "output" if fed_from(held, out) else None
    storage = alive(record.get("storage"))
    try:
        return "storage" if storage is not None and held.untyped_storage() is storage else None
    except RuntimeError:
        return None


def fed_from(held: torch.Tensor, out: torch.Tensor) -> bool:
    """`held` is `out`, came from it (came_from), or is a copy of its values (_copy_of)."""
    return came_from(held, out) or _copy_of(held, out)


def _copy_of(held: torch.Tensor, out: torch.Tensor) -> bool:
    """`held` holds `out`'s values, bit for bit (a clone, a copy to another device)."""
    if held.shape != out.shape or held.dtype != out.dtype or held.is_complex() or held.layout != torch.strided:
        return False
    with torch.no_grad():
        a, b = held.detach(), out.detach().to(held.device)
        return bool(((a == b) | (a.isnan() & b.isnan())).all())


def came_from(held: torch.Tensor, out: torch.Tensor) -> bool:
    """`held` is `out`, a view or detached alias of it (same storage), or computed from it."""
    if held is out:
        return True
    try:
        if held.device == out.device and held.untyped_storage().data_ptr() == out.untyped_storage().data_ptr():
            return True
    except RuntimeError:  # (a tensor without storage: a subclass, a meta tensor)
        return False
    target, todo, seen = out.grad_fn, deque([held.grad_fn]), set()
    while target is not None and todo and len(seen) < NODES:
        node = todo.popleft()
        if node is None or node in seen:
            continue
        if node is target:
            return True
        seen.add(node)
        todo.extend(n for n, _ in node.next_functions)
    return False
