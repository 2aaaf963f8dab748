"""Reading autograd's graph: its nodes from the loss back, the hooks a replay puts on them,
the user's line in a node's forward trace (anomaly mode records it), and, when the
forward replays finite, the search of the loss's graph for the node that made the
non-finite value."""

from __future__ import annotations

import contextlib
import linecache
import os
import re
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure.frames import is_user_file
from stepdbg.agent.measure.tensors import all_finite, first_tensor
from stepdbg.agent.replay.provenance import Provenance
from stepdbg.agent.step.hooks import own_id

TRACE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def finite(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return all_finite(x)
    if isinstance(x, (list, tuple)):
        return all(finite(v) for v in x)
    if isinstance(x, dict):
        return all(finite(v) for v in x.values())
    return True


def graph_nodes(root_node: Any, stop: set[int] | None = None, most: int | None = None) -> list[Any]:
    """Every autograd node reachable from `root_node` (not past nodes in `stop`; the first
    `most`, where given)."""
    seen: set[int] = set()
    order = []
    todo = [root_node]
    while todo and (most is None or len(order) < most):
        n = todo.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        order.append(n)
        if stop and id(n) in stop:
            continue
        todo.extend(nf for nf, _ in n.next_functions)
    return order


def hook_nodes(nodes: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    found: list[dict[str, Any]] = []

    def make(node: Any) -> Any:
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if not found and finite(grad_outputs) and not finite(grad_inputs):
                found.append({"node": node, "name": node.name()})
        return hook

    handles = []
    for n in nodes:
        if type(n).__name__ == "AccumulateGrad":
            continue
        with contextlib.suppress(Exception):
            handles.append(own_id(n.register_hook(make(n))))
    return handles, found


def user_line_from_trace(lines: list[str]) -> dict[str, Any] | None:
    """The innermost user frame in a formatted stack (anomaly mode's forward trace)."""
    best = None
    for m in TRACE_LINE.finditer("".join(lines)):
        fn = m.group(1)
        if not is_user_file(fn):
            continue
        best = {"file": os.path.abspath(fn), "line": int(m.group(2)), "function": m.group(3)}
    if best:
        best["code"] = linecache.getline(best["file"], best["line"]).strip()
    return best


def made_by(node: Any, prov: Provenance, text: str | None) -> dict[str, Any]:
    """The module instance and user line of the forward op that made `node`."""
    at = prov.node_at.get(id(node)) if node is not None else None
    if at is not None:
        return dict(at)
    trace = node.metadata.get("traceback_") if node is not None else None
    where = user_line_from_trace(trace or ([text] if text else []))
    return {"module": None, "module_type": None, **(where or {})}


def user_trace(trace: list[str] | None) -> list[str]:
    """The forward stack anomaly mode recorded, user frames only (never stepdbg's or torch's)."""
    lines = "".join(trace or []).splitlines()
    out = []
    for i, ln in enumerate(lines):
        m = TRACE_LINE.search(ln)
        if m and is_user_file(m.group(1)):
            out.append(ln.strip())
            if i + 1 < len(lines) and not TRACE_LINE.search(lines[i + 1]):
                out.append("    " + lines[i + 1].strip())
    return out[-6:]


def search_loss_graph(loss: torch.Tensor, output: Any, frame: FrameType | None) -> dict[str, Any] | None:
    """Name the op in the loss computation that made the loss non-finite."""
    out_t = first_tensor(output)
    stop = {id(out_t.grad_fn)} if out_t is not None and out_t.grad_fn is not None else set()
    nodes = [n for n in graph_nodes(loss.grad_fn, stop) if id(n) not in stop]
    producer, constant = forward_evidence(nodes)
    if producer is None and out_t is not None:
        handles, found = hook_nodes(nodes)
        try:
            torch.autograd.grad(loss, [out_t], retain_graph=True, allow_unused=True)
        except RuntimeError:
            pass
        finally:
            for h in handles:
                h.remove()
        producer = found[0]["node"] if found else None
    if producer is None and loss.grad_fn is not None:
        # Nothing below it went non-finite: the loss op itself overflowed (a squared error of
        # 1e20, a sum of huge values), when what it saved is finite; below what only scaled
        # it afterwards (`loss / accum`), which cannot make an inf of a finite value.
        node = below_scaling(loss.grad_fn, stop)
        saved = [getattr(node, a, None) for a in dir(node) if a.startswith("_saved_")]
        if finite([v for v in saved if isinstance(v, torch.Tensor)]):
            producer = node
    if producer is None:
        return None
    op = producer.name()
    loss_fn, names = loss_names(op, frame)
    if constant is not None:  # the line that wrote it: float("nan"), math.inf, torch.nan
        value = "nan" if bool(torch.isnan(constant)) else "inf"
        return {"where": "loss", "module": None, "module_type": None, "op": op, "loss_fn": loss_fn,
                "constant": value, **guess_line({"nan", "inf"}, frame, called=False)}
    return {"where": "loss", "module": None, "module_type": None, "op": op, "loss_fn": loss_fn,
            **guess_line(names, frame)}


def _saved(node: Any) -> dict[str, torch.Tensor]:
    """The tensors autograd saved on `node` (none once a backward has freed them)."""
    out = {}
    for a in dir(node):
        if a.startswith("_saved_"):
            try:
                v = getattr(node, a)
            except RuntimeError:  # (freed by a backward)
                continue
            if isinstance(v, torch.Tensor):
                out[a] = v
    return out


def forward_evidence(nodes: list[Any]) -> tuple[Any, torch.Tensor | None]:
    """(node, constant): the node, from the leaves on, whose saved inputs are finite and saved
    result is not; or one given a non-finite number (`out * float("nan")`: autograd saves it
    as a 0-d constant, returned too). (None, None): no such evidence in what was saved."""
    for n in reversed(nodes):  # from the leaves towards the root
        tensors = _saved(n)
        res = tensors.pop("_saved_result", None)
        constant = next((v for v in tensors.values() if v.dim() == 0 and not v.requires_grad and not finite(v)), None)
        if constant is not None or (res is not None and not finite(res) and finite(list(tensors.values()))):
            return n, constant
    return None, None


def search_input_graph(held: torch.Tensor, frame: FrameType | None, most: int = 10_000) -> dict[str, Any] | None:
    """A model's non-finite input that the program computed from another model's output or
    from parameters (it has a grad_fn: a log taken between a generator and its critic, a
    normalization between a backbone and its head): not the data. The op of its graph that
    made the non-finite value from finite ones, at the line guessed from the paused frame's
    source; None where its graph does not say (or it has none: loaded or detached data)."""
    top = held.grad_fn
    if top is None:
        return None
    producer, constant = forward_evidence(graph_nodes(top, most=most))
    if producer is None:  # the op that made `held` itself: its inputs saved finite, its output is not
        inputs = {k: v for k, v in _saved(top).items() if k != "_saved_result"}
        producer = top if inputs and finite(list(inputs.values())) else None
    if producer is None:
        return None
    op, names = loss_names(producer.name(), frame)
    value = ("nan" if bool(torch.isnan(constant)) else "inf") if constant is not None else None
    return {"where": "program", "module": None, "module_type": None, "op": op,
            **({"constant": value} if value else {}),
            **guess_line({"nan", "inf"} if value else names, frame, called=value is None)}


_SHAPE_ONLY = ("MeanBackward", "CloneBackward", "ViewBackward", "ReshapeAliasBackward", "SqueezeBackward",
               "UnsqueezeBackward", "ExpandBackward", "AliasBackward")


def _scaling(node: Any) -> bool:
    """Whether `node` only carries a non-finite loss on and could not have made it from a
    finite one: a division by a constant of magnitude at least 1 (``loss / accum``:
    nanoGPT's gradient accumulation, Lightning's closure), a product by one of at most 1,
    a constant added, a mean, a view."""
    name = node.name()
    if name.startswith(_SHAPE_ONLY):
        return True
    if name.startswith("AddBackward") or name.startswith("SubBackward"):
        return sum(f is not None for f, _ in node.next_functions) == 1
    other, own = getattr(node, "_saved_other", None), getattr(node, "_saved_self", None)
    if own is not None or not (isinstance(other, torch.Tensor) and other.numel() == 1) or not finite(other):
        return False
    value = abs(float(other))  # a 0-d constant (a read the replay may make: it runs at a break)
    return value >= 1 if name.startswith("DivBackward") else name.startswith("MulBackward") and value <= 1


def below_scaling(node: Any, stop: set[int], most: int = 16) -> Any:
    """The node under the chain of ops that only scaled the loss (``_scaling``): the loss
    function whose output they carried, from the loss's own node."""
    for _ in range(most):
        kids = [f for f, _ in node.next_functions if f is not None]
        if len(kids) != 1 or id(kids[0]) in stop or not _scaling(node):
            return node
        node = kids[0]
    return node


def loss_names(op: str, frame: FrameType | None) -> tuple[str, set[str]]:
    """A loss node's function ('MseLossBackward0' -> 'mse_loss') and the names a line may
    call it by: the function's, and the variables of the frame that hold such a loss module
    (``criterion = nn.MSELoss()``)."""
    base = re.sub(r"Backward\d*$", "", op)
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()
    names = {base.lower(), snake}
    if frame is not None:
        for var, obj in [*frame.f_globals.items(), *frame.f_locals.items()]:
            if isinstance(obj, torch.nn.Module) and type(obj).__name__.lower() in names:
                names.add(var)
    return snake, names


def guess_line(names: set[str], frame: FrameType | None, called: bool = True) -> dict[str, Any]:
    """The user line that most likely ran the op called by one of `names` (or, not
    `called`, that holds one of them as a word): the backward-calling function is searched."""
    if frame is None:
        return {}
    code = frame.f_code
    first = code.co_firstlineno
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"\b(?:{alts})\w*\s*\(" if called else rf"\b(?:{alts})\b", re.I)
    hits = [n for n in range(first, frame.f_lineno + 1)
            if pattern.search(linecache.getline(code.co_filename, n))]
    if not hits:
        return {"file": os.path.abspath(code.co_filename), "line": None, "function": code.co_name}
    line = hits[-1]
    return {"file": os.path.abspath(code.co_filename), "line": line, "function": code.co_name,
            "code": linecache.getline(code.co_filename, line).strip(), "line_from": "source search"}
