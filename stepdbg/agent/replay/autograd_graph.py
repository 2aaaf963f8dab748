"""Reading autograd's graph: its nodes from the loss back, the hooks a replay puts on them,
the user's line in a node's forward trace (anomaly mode records it), and, when the
forward replays finite, the search of the loss's graph for the node that made the
non-finite value."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure import source_lines
from stepdbg.agent.measure.frames import is_user_file
from stepdbg.agent.measure.tensors import MAX_OUTPUTS, all_finite, tensors_in
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


def graph_nodes(root_node: Any, stop: set[int] | None = None) -> list[Any]:
    """Every autograd node reachable from `root_node` (not past nodes in `stop`)."""
    seen: set[int] = set()
    order = []
    todo = [root_node]
    while todo:
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
        best["code"] = source_lines.line(best["file"], best["line"]).strip()
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
    # The loss's graph down to the model's outputs (every one of them: (features, logits))
    outs = [t for t in itertools.islice(tensors_in(output), MAX_OUTPUTS) if t.requires_grad]
    stop = {id(t.grad_fn) for t in outs if t.grad_fn is not None}
    nodes = [n for n in graph_nodes(loss.grad_fn, stop) if id(n) not in stop]
    producer, constant = forward_evidence(nodes)
    if producer is None and outs:
        handles, found = hook_nodes(nodes)
        try:
            torch.autograd.grad(loss, outs, retain_graph=True, allow_unused=True)
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
        if finite(list(_saved(node).values())):
            producer = node
    if producer is None:
        return None
    op = producer.name()
    loss_fn, names = loss_names(op, frame)
    if constant is not None:  # the line that wrote it: float("nan"), math.inf, torch.nan
        value = "nan" if bool(torch.isnan(constant)) else "inf"
        return {"where": "loss", "module": None, "module_type": None, "op": loss_fn, "node": op,
                "loss_fn": loss_fn, "constant": value, **guess_line({"nan", "inf"}, frame, called=False)}
    return {"where": "loss", "module": None, "module_type": None, "op": loss_fn, "node": op, "loss_fn": loss_fn,
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
        if res is None and tensors and finite(list(tensors.values())) and _made_nonfinite(n, tensors):
            return n, None  # (log keeps its input only: log of a negative mean)
    return None, None


# Ops that keep their inputs and not their result, whose result is made again from them to
# see whether it was non-finite: those that make a NaN or an inf of finite values.
CHUNK = 1 << 22  # values made again at a time
_UNARY = {"LogBackward0": torch.log, "Log2Backward0": torch.log2, "Log10Backward0": torch.log10,
          "Log1PBackward0": torch.log1p, "AcosBackward0": torch.acos, "AsinBackward0": torch.asin,
          "AtanhBackward0": torch.atanh, "LgammaBackward0": torch.lgamma, "DigammaBackward0": torch.digamma,
          "ErfinvBackward0": torch.erfinv}


def _made_nonfinite(node: Any, tensors: dict[str, torch.Tensor]) -> bool:
    """Whether `node`'s op, made again from the inputs it saved, gives a non-finite value;
    a contiguous input a chunk at a time (memory: one chunk's result, whatever its size).
    False for an op not made again here."""
    name, own = node.name(), tensors.get("_saved_self")
    if own is None:
        return False
    exponent = getattr(node, "_saved_exponent", None) if name == "PowBackward0" else None
    if name in _UNARY or isinstance(exponent, (int, float)):
        op = _UNARY.get(name) or (lambda t: torch.pow(t, exponent))
        parts = own.detach().view(-1).split(CHUNK) if own.is_contiguous() else (own.detach(),)
        with torch.no_grad():
            return any(not finite(op(p)) for p in parts)
    other = tensors.get("_saved_other")
    if name == "DivBackward0" and other is not None and max(own.numel(), other.numel()) <= CHUNK:
        with torch.no_grad():
            return not finite(torch.div(own, other))
    return False


_WRITERS = ("MaskedFillBackward", "WhereBackward", "IndexPutBackward", "FillBackward", "CopySlices")
# Ops that only move or copy values: one that made a non-finite value of finite inputs did not
# (its output was written in place afterwards, with autograd off: `x = fake.clone(); x[m] = real`).
_MOVERS = ("CloneBackward", "ToCopyBackward", "RepeatBackward", "ViewBackward", "ExpandBackward", "CatBackward",
           "StackBackward", "SelectBackward", "SliceBackward", "IndexBackward", "PermuteBackward", "TransposeBackward",
           "TBackward", "UnsqueezeBackward", "SqueezeBackward", "ReshapeAliasBackward", "AliasBackward",
           "UnbindBackward", "SplitBackward", "NarrowBackward", "FlipBackward", "RollBackward", "GatherBackward",
           "UnfoldBackward", "AsStridedBackward", "CopyBackwards", "ContiguousBackward")


def search_input_graph(held: torch.Tensor, frame: FrameType | None) -> dict[str, Any] | None:
    """A model's non-finite input that the program's own op made from finite values (a log
    of a generator's output taken between it and its critic): not the data. Only the op that
    made `held` is judged, and only where every input of it is known finite (saved by it,
    or saved as its inputs' own results, or a parameter): an op that keeps only its result
    (tanh, relu, exp) says nothing of its inputs, which may hold the data's NaN or another
    model's. An op that writes values (masked_fill, where, setitem) made it by writing one.
    The line is the paused function's one line that calls the op, else none. None: no
    grad_fn (loaded or detached data), or nothing known."""
    top = held.grad_fn
    if top is None or top.name().startswith(_MOVERS) or not _inputs_known_finite(top):
        return None
    op, names = loss_names(top.name(), frame)
    written = top.name().startswith(_WRITERS)
    value = ("nan" if bool(torch.isnan(held.detach()).any()) else "inf") if written else None
    line = guess_line(names, frame, unique=True)
    return {"where": "program", "module": None, "module_type": None, "op": op,
            **({"constant": value} if value else {}), **line}


def _inputs_known_finite(node: Any) -> bool:
    """Every input of `node` is known, and finite: its children's outputs (a parameter, a
    saved result) or, for the inputs not known so, as many floating tensors saved on it."""
    saved = {k: v for k, v in _saved(node).items() if k != "_saved_result"}
    floats = [v for v in saved.values() if v.is_floating_point() or v.is_complex()]
    unknown = 0
    for child, _ in node.next_functions:
        out = None
        if child is not None and hasattr(child, "variable"):  # (AccumulateGrad: a leaf, a parameter)
            out = child.variable
        elif child is not None:
            out = _saved(child).get("_saved_result")
        if out is None:
            unknown += 1
        elif not finite(out):
            return False
    if unknown and len(floats) < len(node.next_functions):
        return False
    return finite(floats)


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
    (``criterion = nn.MSELoss()``). A custom autograd.Function's node ('MyFnBackward', no
    number) is named by its class, as the program calls it (MyFn.apply)."""
    base = re.sub(r"Backward\d*$", "", op)
    custom = re.search(r"[a-z0-9]Backward$", op) is not None
    snake = base if custom else re.sub(r"(?<!^)(?<![0-9])(?=[A-Z])", "_", base).lower()  # (Log1P: log1p)
    names = {base.lower(), snake, base}
    if frame is not None:
        for var, obj in [*frame.f_globals.items(), *frame.f_locals.items()]:
            if isinstance(obj, torch.nn.Module) and type(obj).__name__.lower() in names:
                names.add(var)
    return snake, names


def guess_line(names: set[str], frame: FrameType | None, called: bool = True, unique: bool = False,
               pattern: re.Pattern[str] | None = None) -> dict[str, Any]:
    """The user line that most likely ran the op called by one of `names` (or, not
    `called`, that holds one of them as a word; or that matches `pattern`): the
    backward-calling function is searched. `unique`: no line where two lines match (a
    guess between them would be a coin's)."""
    if frame is None:
        return {}
    code = frame.f_code
    first = code.co_firstlineno
    alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    more = "_?" if unique else r"\w*"  # (unique: `div(` or `div_(`, not `divmod(`)
    scalar = r"(?<!math\.)(?<!np\.)(?<!numpy\.)"  # (math.sqrt( is a number's, not a tensor's)
    exact = re.compile(rf"{scalar}\b(?:{alts})_?\s*\(", re.I) if called and not pattern else None
    pattern = pattern or re.compile(rf"{scalar}\b(?:{alts}){more}\s*\(" if called else rf"\b(?:{alts})\b", re.I)
    lines = range(first, frame.f_lineno + 1)
    hits = [n for n in lines if pattern.search(source_lines.line(code.co_filename, n).split("#")[0])]  # (a comment calls nothing)
    if exact and len(hits) > 1:  # a line calling it by its name before one calling a longer name (log before log1p)
        hits = [n for n in hits if exact.search(source_lines.line(code.co_filename, n).split("#")[0])] or hits
    if not hits or (unique and len(hits) > 1):
        return {"file": os.path.abspath(code.co_filename), "line": None, "function": code.co_name}
    line = hits[-1]
    return {"file": os.path.abspath(code.co_filename), "line": line, "function": code.co_name,
            "code": source_lines.line(code.co_filename, line).strip(), "line_from": "source search"}


def outputs_beside(cap: dict[str, Any]) -> list[int]:
    """The model's outputs that the loss reached directly, when there are several (an aux
    loss beside the loss on the logits; backward_capture.settle): the replay's backward
    starts from one of them (grad_output_at), and the others' part is not replayed."""
    direct = list(cap.get("outputs_direct") or [])
    return direct if len(direct) > 1 else []


def no_gradient_words(cap: dict[str, Any]) -> str:
    """Why the backward is not replayed at a break after it: nothing was armed, or the loss
    reached none of the outputs watched (a model returning 50 tensors, the logits last)."""
    if cap.get("outputs_watched"):
        return (f"backward not replayed: no gradient reached the model's first {cap['outputs_watched']} outputs, "
                "which stepdbg watches")
    return ("backward not replayed: no gradient was captured at the model output (arm replay with --on-break "
            "replay or from a front end)")
