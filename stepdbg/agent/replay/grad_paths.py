"""Where a step's non-finite gradients come from when the model's own backward, replayed
from the gradient its output received, stays finite. Not a transient fault where the
program's own code made them, which a replay of the model does not run; said only on
evidence, since a transient fault leaves the same finite replay:

- **another path of the loss into the parameters** (a penalty ``sqrt((w ** 2).sum())`` at
  w = 0): the loss's graph keeps its nodes after the backward (its saved tensors are
  freed), so the paths that do not go through the model's output are read from it. Said
  where such a path holds an op whose gradient is infinite at a finite input (sqrt, norm,
  log, div... not an L2 term's square) and reaches every parameter whose gradient is
  non-finite, or, where clip_grad_norm_ spread a NaN norm to all of them, one;
- **a division of the gradients after the backward by 0** (a count of tokens that was 0):
  every element of every gradient non-finite, some of them infinite (x / 0: a NaN spread
  by later ops or a clip is NaN everywhere) or all from a zero output gradient (0 / 0: a
  loss masked to nothing), and the paused function divides ``.grad``.

The graph read here is cut at MOST_NODES: then nothing is claimed, and the verdict says so.
"""

from __future__ import annotations

import math
import re
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.replay.advice import GUARDS
from stepdbg.agent.replay.autograd_graph import guess_line, loss_names

MOST_NODES = 100_000
# Ops whose backward is infinite at a finite input (at 0, or at +-1), in the order one is
# named on a path; a pow only with a saved exponent below 1.
SINGULAR = ("sqrt", "rsqrt", "linalg_vector_norm", "norm", "log", "log2", "log10", "div", "reciprocal", "acos",
            "asin", "atanh", "cdist", "pow")
# .grad /= n; p.grad = p.grad / n; g.div_(n) (a list of gradients); .mul_(1 / n); torch._foreach_div_
DIVIDES = re.compile(r"\.grad\b\s*/=|\.grad\b\s*=[^=].*/|\.div_\s*\(|\.mul_\s*\(\s*1(?:\.0*)?\s*/|_foreach_div_\s*\(")
CUT = "cut"  # explain()'s answer where the loss's graph was too large to read whole


def explain(root: torch.nn.Module, prefix: str, cap: dict[str, Any], frame: FrameType | None,
            clip: Any, paused: FrameType | None = None) -> dict[str, Any] | str | None:
    """What made the root's non-finite gradients, where the model's backward did not; CUT
    where the loss's graph was too large to tell. `clip`: what clip_grad_norm_ returned;
    `frame`: the one that called the model (the loss's terms are near), `paused`: the
    break's (where the program divides the gradients, after its backward)."""
    named = [(".".join(filter(None, (prefix, n))), p) for n, p in root.named_parameters() if p.grad is not None]
    bad = {id(p): n for n, p in named if not bool(torch.isfinite(p.grad).all())}
    if not bad:
        return None
    spread = clip is not None and not _finite(clip)  # (a NaN norm scaled every gradient by NaN)
    found = _other_path(cap, bad, frame, spread)
    if found is not None or clip is not None:
        return found
    g_out = cap.get("grad_output")
    zero = isinstance(g_out, torch.Tensor) and not bool(g_out.any())  # (then the backward made 0s: 0 / 0 is NaN)
    if any(bool(torch.isfinite(p.grad).any()) for _, p in named) or \
            not (zero or any(bool(torch.isinf(p.grad).any()) for _, p in named)):
        return None
    where = guess_line(set(), paused or frame, pattern=DIVIDES, unique=True)
    if not where.get("line") and not guess_line(set(), paused or frame, pattern=DIVIDES).get("line"):
        return None  # (no line divides a gradient: no evidence; two that do: it is said, at no line)
    return {"kind": "changed_after_backward", "params": sorted(bad.values()), **where,
            "summary": "the program divided every gradient by 0 after the backward"
                       + (f", at {where['file']}:{where['line']}" if where.get("line") else ""),
            "verdict": ("not a transient fault: the model's backward, replayed from its output's gradient, is finite, "
                        "and every element of every gradient is not, as a division by 0 makes them "
                        "(a count of tokens or samples that was 0 in this step). It comes back with such a batch"),
            "advice": {"cause": "domain", "text": "guard what the gradients are divided by (max(n, 1)), or skip the "
                                                  "update of a step whose count is 0"}}


def _finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError, RuntimeError):
        return True


def _other_path(cap: dict[str, Any], bad: dict[int, str], frame: FrameType | None,
                spread: bool) -> dict[str, Any] | str | None:
    """A term of the loss on the parameters themselves: an op whose gradient can be
    infinite (a sqrt), outside the model's graph, under which only ops of the parameters
    lie (nothing of the model's forward: an auxiliary loss of its activations, a flaky op
    in it, is no evidence), reaching every non-finite gradient (or one, clip-spread)."""
    loss, out_node = cap.get("loss"), cap.get("output_node")
    if not isinstance(loss, torch.Tensor) or loss.grad_fn is None or out_node is None:
        return None
    walked, model = _walk(loss.grad_fn, out_node), _walk(out_node, None)
    if walked is None or model is None:
        return CUT
    nodes, inside = walked, {i for i, n in model.items() if not isinstance(getattr(n, "variable", None), torch.Tensor)}
    terms = []  # (op, the chain from the op down to a bad parameter, the bad parameters under it)
    budget = [MOST_NODES]  # (for every term's walk together: a chain of sqrts is no square of work)
    for i, n in nodes.items():
        op = loss_names(n.name(), None)[0]
        if i in inside or op not in SINGULAR or not _singular(n):
            continue
        under = _walk(n, None, inside, budget)
        if budget[0] <= 0:
            return CUT
        if under is None:
            continue
        params = {id(v): m for m in under.values() if id(v := getattr(m, "variable", None)) in bad}
        if params:
            terms.append((op, _chain(n, next(iter(params.values()))), set(params)))
    hit = set().union(*(t[2] for t in terms)) if terms else set()
    if not hit or not (spread or hit == bad.keys()):
        return None
    op, chain, _ = min(terms, key=lambda t: SINGULAR.index(t[0]))
    shown = [o for o in (loss_names(m.name(), None)[0] for m in chain) if o not in ("add", "sub", "mul")][:4]
    where = next((w for o in [op, *shown] if (w := guess_line({o}, frame, unique=True)).get("line")), {})
    at = f" at {where.get('file')}:{where['line']}" if where.get("line") else ""
    names = sorted(bad[p] for p in hit)
    guard = GUARDS.get("sqrt" if op.endswith("norm") else op)
    return {"kind": "other_path", "params": names, "op": op, "ops": shown, **where,
            "summary": (f"the non-finite gradients of {', '.join(names[:3])}{' and more' if len(names) > 3 else ''} "
                        f"come through another path of the loss into the parameters, {' -> '.join(shown)}{at}, not "
                        "through the model's output" + ("; clip_grad_norm_ then spread the NaN to every gradient"
                                                        if spread else "")),
            "verdict": ("not a transient fault: the model's backward, replayed from its output's gradient, is finite; "
                        f"the path that made them holds a {op}, whose gradient is infinite at a finite input, in a term "
                        "of the loss on the parameters themselves (a penalty or a regularizer), which a replay of the "
                        "model's output does not run. It comes back"),
            "advice": {"cause": "domain" if guard else "program",
                       "text": f"{op}'s backward there met a value outside its domain: {guard}" if guard else
                               "look at the term on the parameters at that line"}}


def _walk(top: Any, stop: Any, avoid: set[int] | None = None, budget: list[int] | None = None) -> dict[int, Any] | None:
    """Every node of the graph under `top` (id -> node), not past `stop`; None past
    MOST_NODES (or `budget`, spent here), or where it meets a node in `avoid`."""
    nodes: dict[int, Any] = {id(top): top}
    todo = [top]
    while todo:
        if len(nodes) > MOST_NODES or (budget is not None and budget[0] <= 0):
            return None
        node = todo.pop()
        if budget is not None:
            budget[0] -= 1
        if avoid is not None and id(node) in avoid:
            return None
        if node is stop:
            continue
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) not in nodes:
                nodes[id(nxt)] = nxt
                todo.append(nxt)
    return nodes


def _chain(top: Any, leaf: Any) -> list[Any]:
    """The nodes from `leaf` (a parameter's AccumulateGrad) up to `top`, `leaf` left out:
    the term's ops in the order the forward ran them."""
    parent: dict[int, Any] = {id(top): None}
    todo = [top]
    while todo and id(leaf) not in parent:
        node = todo.pop()
        for nxt, _ in node.next_functions:
            if nxt is not None and id(nxt) not in parent:
                parent[id(nxt)] = node
                todo.append(nxt)
    chain, node = [], parent.get(id(leaf))
    while node is not None and len(chain) < 64:
        chain.append(node)
        node = parent.get(id(node))
    return chain


def _singular(node: Any) -> bool:
    """A pow is singular with an exponent below 1 (a square is not); the others always."""
    if not node.name().startswith("Pow"):
        return True
    exponent = getattr(node, "_saved_exponent", None)
    try:
        return exponent is not None and float(exponent) < 1
    except (TypeError, ValueError, RuntimeError):
        return False
