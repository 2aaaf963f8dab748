"""Memory by category: what holds the bytes at a pause, per device.

Every tensor is counted by its storage, once (a view, a tied weight and a saved copy of a
parameter share one): the first category that claims a storage keeps it, in the order
parameters, gradients, optimizer state, the batch, activations saved for backward, other
live tensors, and stepdbg's own (what a replay needs, rewind snapshots). Each gets a name a user recognises: the parameter's name, its ``.grad``,
``opt.state[fc1.weight].exp_avg``, a variable of a paused frame (``x``, ``kept[3]``), the
module whose forward saved it (when saved activations are recorded) or the variable whose
autograd graph holds it. Plain functions over torch objects: nothing here is kept.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure.live_tensors import walk_all
from stepdbg.wire.conditions import format_size

CATEGORIES = ("parameters", "gradients", "optimizer_state", "batch", "activations", "other_tensors", "stepdbg")
_CONTAINER_ITEMS = 10_000  # items of one list or dict looked into for tensors
# Autograd nodes walked from the paused frames' tensors, all graphs together (each node once:
# an unrolled RNN's kept outputs share their prefix, and a walk per output was quadratic).
# Well below the depth at which torch itself crashes freeing a chain whose nodes Python
# touched (~30,000-50,000): a census on a deep graph answers in part, never harms the job.
_GRAPH_NODES = 10_000


try:  # torch.compile's tracing tensors: no memory, and asking their storage's address warns
    from torch._subclasses.fake_tensor import FakeTensor as _FakeTensor
except ImportError:  # pragma: no cover - every torch stepdbg supports has it
    _FakeTensor = ()  # type: ignore[assignment,misc]


def storage_of(t: torch.Tensor) -> tuple[tuple[str, int], int] | None:
    """((device, storage address), storage bytes) of a tensor; None for one without storage."""
    t = getattr(t, "_local_tensor", t)  # a DTensor: its shard on this rank
    if isinstance(t, _FakeTensor):
        return None
    try:
        s = t.untyped_storage()
        key, nbytes = (str(t.device), s.data_ptr()), s.nbytes()
    except Exception:  # sparse, meta, or a subclass without a storage
        return None
    return (key, nbytes) if nbytes and key[1] else None


_SPARSE_PARTS = {
    torch.sparse_coo: lambda t: [("values", t._values()), ("indices", t._indices())],
    torch.sparse_csr: lambda t: [("values", t.values()), ("crow_indices", t.crow_indices()),
                                 ("col_indices", t.col_indices())],
    torch.sparse_csc: lambda t: [("values", t.values()), ("ccol_indices", t.ccol_indices()),
                                 ("row_indices", t.row_indices())],
}


class Census:
    """Storages seen so far, each with the category and name of its first claimant."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], dict[str, Any]] = {}
        self.refs: dict[tuple[str, int], weakref.ref[torch.Tensor]] = {}
        self.skipped = 0  # tensors that could not be counted (a nested tensor has no sizes)
        self.partial: dict[str, Any] = {}  # what was walked in part, and how far

    def add(self, t: Any, category: str, name: str, **extra: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        if t.layout in _SPARSE_PARTS:  # a sparse tensor has no storage of its own: its parts do
            try:
                parts = _SPARSE_PARTS[t.layout](t)
            except Exception:
                self.skipped += 1
                return False
            return any([self.add(p, category, f"{name} ({part})", **extra) for part, p in parts])
        try:
            found = storage_of(t)
            if found is None or found[0] in self.rows:
                return False
            row = {"name": name, "category": category, "bytes": found[1], "shape": list(t.shape),
                   "dtype": str(t.dtype).removeprefix("torch."), "device": str(t.device), **extra}
            self.refs[found[0]] = weakref.ref(t)
        except Exception:  # one odd tensor never fails the view: counted as skipped
            self.skipped += 1
            return False
        self.rows[found[0]] = row
        return True

    def add_all(self, named: Iterable[tuple[str, Any]], category: str) -> None:
        for name, t in named:
            self.add(t, category, name)

    def result(self, largest: int = 20) -> dict[str, Any]:
        rows = list(self.rows.values())
        by_device: dict[str, dict[str, int]] = {}
        for r in rows:
            dev = by_device.setdefault(r["device"], dict.fromkeys(CATEGORIES, 0))
            dev[r["category"]] += r["bytes"]
        total = {c: sum(d[c] for d in by_device.values()) for c in CATEGORIES}
        top = sorted(self.rows.items(), key=lambda kv: -kv[1]["bytes"])[:largest]
        seen: dict[str, int] = {}
        for _, r in top:  # a name a front end can ask for: unique
            seen[r["name"]] = n = seen.get(r["name"], 0) + 1
            if n > 1:
                r["name"] += f" ({n})"
        return {"by_category": total, "by_device": by_device, "counted": sum(total.values()),
                "largest": [r for _, r in top], "holders": holders(rows), "skipped": self.skipped,
                "partial": self.partial,
                "refs": {r["name"]: self.refs[k] for k, r in top}}  # for a front end to open one; not sent


def holders(rows: list[dict[str, Any]], most: int = 5) -> list[dict[str, Any]]:
    """Bytes by the variable that holds them (``kept`` for ``kept[0]`` … ``kept[49]``; the
    variable whose graph keeps saved activations alive), largest first: what a leak names."""
    by: dict[str, dict[str, Any]] = {}
    for r in rows:
        var = r.get("holder")
        if var:
            h = by.setdefault(var, {"name": var, "bytes": 0, "tensors": 0, "category": r["category"]})
            h["bytes"] += r["bytes"]
            h["tensors"] += 1
    return sorted(by.values(), key=lambda h: -h["bytes"])[:most]


def top_holder(counted: dict[str, Any]) -> str:
    """'; kept holds 2GB in 50 tensors': the variable that holds most, as a rule says it."""
    h = counted["holders"][0] if counted.get("holders") else None
    return f"; {h['name']} holds {format_size(h['bytes'])} in {h['tensors']} tensors" if h else ""


def take(roots: Iterable[torch.nn.Module], optimizers: Iterable[Any], batch: Any,
         frames: list[FrameType], saved: list[tuple[str, torch.Tensor]] | None = None,
         own: Iterable[tuple[str, Any]] = (), everything: bool = True, largest: int = 20,
         live: Callable[[], list[torch.Tensor]] | None = None) -> dict[str, Any]:
    """The census: the model's parameters and gradients, the optimizers' state, the batch,
    saved activations (recorded per module, else found in the autograd graphs of the
    frames' tensors), the frames' other tensors, stepdbg's `own` and, with `everything`,
    every other live tensor (a walk of the garbage collector's objects, or `live`'s: a
    live_tensors.LiveTensors finds the same ones with less walking)."""
    c = Census()
    opts = list(optimizers)
    roots = list(roots)
    names = _param_names(roots, opts)
    params = list(_params(roots, opts))
    c.add_all(((names[id(p)], p) for p in params), "parameters")
    c.add_all(((names[id(p)] + ".grad", p.grad) for p in params if p.grad is not None), "gradients")
    c.add_all(_optimizer_state(opts, names), "optimizer_state")
    frame_vars = list(_frame_tensors(frames))
    by_id = {id(t): n for n, t in frame_vars}
    c.add_all(((by_id.get(id(t), n), t) for n, t in named_in("batch", batch)), "batch")
    for module, t in saved or ():
        c.add(t, "activations", f"saved by {module}", holder=module)
    walked: dict[int, Any] = {}  # every node once, across the frames' graphs
    graphs = [(var, node, s) for var, t in frame_vars for node, s in _graph_saved(t, walked)]
    # The batch is what the model and the loss took: a frame's data tensor (no graph, no grad)
    # that a graph saved went into the step (mse_loss's target y beside the model's x; y was
    # filed under other tensors, x under batch: the closing walk of 05:50's 29).
    taken = {found[0] for _, _, s in graphs if _is_data(s) and (found := storage_of(s))}
    c.add_all(((var, t) for var, t in frame_vars if _is_data(t) and (found := storage_of(t)) and found[0] in taken),
              "batch")
    for var, node, s in graphs:
        c.add(s, "activations", f"{node} in {var}'s graph", holder=f"{var} (its autograd graph)")
    if len(walked) >= _GRAPH_NODES:
        c.partial["autograd_nodes"] = {"walked": len(walked), "limit": _GRAPH_NODES}
    for var, t in frame_vars:
        c.add(t, "other_tensors", var, holder=var.split("[")[0].split(".")[0])
    c.add_all(own, "stepdbg")
    if everything:
        for t in (live or walk_all)():
            c.add(t, "other_tensors", "(no variable)" if t.grad_fn is None else f"(no variable; {t.grad_fn.name()})")
    return c.result(largest)


def _is_data(t: torch.Tensor) -> bool:
    """A tensor of data: no autograd graph behind it and no gradient asked for."""
    return t.grad_fn is None and not t.requires_grad


def _params(roots: Iterable[torch.nn.Module], optimizers: list[Any]) -> Iterator[torch.Tensor]:
    for root in roots:
        yield from root.parameters()
    for opt in optimizers:
        for g in opt.param_groups:
            yield from g["params"]


def _param_names(roots: Iterable[torch.nn.Module], optimizers: list[Any]) -> dict[int, str]:
    """Each parameter's name in its model; `param#N` for one only an optimizer holds."""
    names: dict[int, str] = {}
    for root in roots:
        for n, p in root.named_parameters():
            names.setdefault(id(p), n)
    for p in _params((), optimizers):
        names.setdefault(id(p), f"param#{len(names)}")
    return names


def _optimizer_state(optimizers: list[Any], names: dict[int, str]) -> Iterator[tuple[str, Any]]:
    for opt in optimizers:
        for p, st in list(opt.state.items()):
            for k, v in list(st.items()) if isinstance(st, dict) else ():
                yield f"opt.state[{names.get(id(p), '?')}].{k}", v


def named_in(name: str, value: Any, depth: int = 2) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) for a tensor, or the tensors in a list, tuple or dict (`kept[3]`)."""
    try:
        isinstance(value, torch.Tensor)
    except Exception:  # a dead weakref.proxy raises ReferenceError at any look
        return
    if isinstance(value, torch.Tensor):
        yield name, value
    elif depth and isinstance(value, (list, tuple)):
        for i, v in enumerate(value[:_CONTAINER_ITEMS]):
            yield from named_in(f"{name}[{i}]", v, depth - 1)
    elif depth and isinstance(value, dict):
        for i, (k, v) in enumerate(list(value.items())):
            if i >= _CONTAINER_ITEMS:
                break
            yield from named_in(f"{name}[{k!r}]", v, depth - 1)


def _frame_tensors(frames: list[FrameType]) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors the paused frames hold, innermost frame first, by variable name."""
    for f in reversed(frames):
        for var, value in list(f.f_locals.items()):
            try:
                skip = var.startswith("__") or isinstance(value, torch.nn.Module)
            except Exception:  # a dead weakref.proxy
                continue
            if not skip:
                yield from named_in(var, value)


def _graph_saved(t: torch.Tensor, seen: dict[int, Any]) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors autograd saved for the backward of `t`'s graph (node name, tensor), from
    the nodes not in `seen` (which holds the nodes walked, so that no id is reused), until
    _GRAPH_NODES have been."""
    root = t.grad_fn
    if root is None or id(root) in seen or len(seen) >= _GRAPH_NODES:
        return
    seen[id(root)] = root
    todo = [root]
    while todo and len(seen) < _GRAPH_NODES:
        node = todo.pop()
        for attr in dir(node):
            if attr.startswith("_saved_"):
                try:
                    value = getattr(node, attr)
                except Exception:  # freed by a backward already
                    continue
                for v in value if isinstance(value, (list, tuple)) else (value,):
                    if isinstance(v, torch.Tensor):
                        yield node.name(), v
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) not in seen:
                seen[id(nxt)] = nxt
                todo.append(nxt)


def of_step(model: Any, frames: list[FrameType], everything: bool = True,
            live: Callable[[], list[torch.Tensor]] | None = None) -> dict[str, Any]:
    """The census of the StepModel `model`'s program (its roots, optimizers, batch and
    saved activations), with the paused `frames`' variables for names and what stepdbg
    itself keeps (the replay's capture, rewind snapshots) counted as its own."""
    cap = model.capture
    own = [*named_in("replay capture: rng", cap.get("rng")),
           *named_in("replay capture: buffers", cap.get("buffers")),
           *named_in("replay capture: grad_output", cap.get("grad_output"))]
    for kept in model.kept_by_stepdbg:
        own += kept()
    return take(list(model.roots.values()), list(model.optimizers), cap.get("batch"), frames,
                model.saved.live() if model.saved is not None else None, own, everything, live=live)
