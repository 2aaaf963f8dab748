"""Replay a step to find the op, module and line that produced the first non-finite value.

The paused step's model forward is run again on the same inputs, with the RNG state
and buffers the step started with, under ``torch.autograd.detect_anomaly``:

- forward: a TorchFunctionMode sees every torch op with its outputs; the first op with
  finite inputs and a non-finite output is the producer; module forward hooks active
  only during the replay say which module was running; the innermost user frame gives
  the line.
- backward: the gradient captured at the model output during the real backward is fed
  back through the replayed graph (``torch.autograd.grad``, so ``.grad`` is untouched);
  hooks on every graph node find the first node with finite incoming and non-finite
  outgoing gradients (inf too, which anomaly mode alone does not report); anomaly mode's
  record of the forward stack names the line.
- loss: when the model output is finite and the loss is not, the loss graph (still
  alive before backward) is searched through its saved tensors and gradients.

Model parameters, buffers, gradients, RNG state and train/eval modes are as they were
when the replay returns.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import time
import warnings
from collections.abc import Iterator
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .frames import is_user_file, user_frame, where_of
from .step_model import StepModel
from .tensors import first_tensor as _first_tensor
from .tensors import rng_state as _rng_state
from .tensors import set_rng_state

_TRACE_LINE = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _finite(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        if not (x.is_floating_point() or x.is_complex()) or x.numel() == 0:
            return True
        return bool(torch.isfinite(x.detach()).all())
    if isinstance(x, (list, tuple)):
        return all(_finite(v) for v in x)
    if isinstance(x, dict):
        return all(_finite(v) for v in x.values())
    return True


@contextlib.contextmanager
def preserved_state(model: StepModel) -> Iterator[None]:
    """Put buffers, RNG and train/eval modes of the step's model back as they are now."""
    root = model.capture.get("root")
    buffers = {n: b.detach().clone() for n, b in root.named_buffers()} if root is not None else {}
    modes = [(m, m.training) for m in root.modules()] if root is not None else []
    rng = _rng_state()
    busy = model.busy
    model.busy = True
    try:
        yield
    finally:
        model.busy = busy
        set_rng_state(rng)
        for m, training in modes:
            m.training = training
        if root is not None:
            with torch.no_grad():
                for n, b in root.named_buffers():
                    if n in buffers and b.shape == buffers[n].shape:
                        b.copy_(buffers[n])


class _ModuleStack:
    """Which module is running, from forward hooks that live only during the replay."""

    def __init__(self, root: torch.nn.Module) -> None:
        self.names = {id(m): (n, type(m).__name__) for n, m in root.named_modules()}
        self.stack: list[torch.nn.Module] = []
        self.handles: list[Any] = []

    def __enter__(self) -> _ModuleStack:
        from torch.nn.modules import module as nn_module

        self.handles = [
            nn_module.register_module_forward_pre_hook(lambda m, a: self.stack.append(m)),
            nn_module.register_module_forward_hook(lambda m, a, o: self._pop(m), always_call=True),
        ]
        return self

    def _pop(self, m: torch.nn.Module) -> None:
        if self.stack and self.stack[-1] is m:
            self.stack.pop()

    def __exit__(self, *exc: Any) -> None:
        for h in self.handles:
            h.remove()

    def current(self) -> tuple[str | None, str | None]:
        for m in reversed(self.stack):
            if id(m) in self.names:
                name, typ = self.names[id(m)]
                return name, typ
        return None, None


class _FirstNonFinite(TorchFunctionMode):
    """Records the first op whose inputs are finite and whose output is not."""

    def __init__(self, modules: _ModuleStack) -> None:
        super().__init__()
        self.modules = modules
        self.first: dict[str, Any] | None = None
        self.line_module: dict[tuple[str, int], tuple[str | None, str | None]] = {}
        self.ops = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not isinstance(out, (torch.Tensor, list, tuple)):
            return out
        self.ops += 1
        frame = user_frame(__import__("sys")._getframe(1))
        if frame is not None:
            key = (os.path.abspath(frame.f_code.co_filename), frame.f_lineno)
            if key not in self.line_module:
                # The module whose forward holds this line, else the innermost running one.
                owner = self.modules.names.get(id(frame.f_locals.get("self")))
                self.line_module[key] = owner or self.modules.current()
        if self.first is None and not _finite(out) and _finite(args) and _finite(kwargs):
            module, mtype = self.modules.current()
            self.first = {
                "where": "forward",
                "module": module,
                "module_type": mtype,
                "op": _op_name(func),
                **(where_of(frame) or {}),
            }
        return out


def _op_name(func: Any) -> str:
    return getattr(func, "__name__", None) or str(func)


def _graph_nodes(root_node: Any, stop: set[int] | None = None) -> list[Any]:
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


def _hook_nodes(nodes: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    found: list[dict[str, Any]] = []

    def make(node: Any) -> Any:
        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if not found and _finite(grad_outputs) and not _finite(grad_inputs):
                found.append({"node": node, "name": node.name()})
        return hook

    handles = []
    for n in nodes:
        if type(n).__name__ == "AccumulateGrad":
            continue
        with contextlib.suppress(Exception):
            handles.append(n.register_hook(make(n)))
    return handles, found


def _user_line_from_trace(lines: list[str]) -> dict[str, Any] | None:
    """The innermost user frame in a formatted stack (anomaly mode's forward trace)."""
    best = None
    for m in _TRACE_LINE.finditer("".join(lines)):
        fn = m.group(1)
        if not is_user_file(fn):
            continue
        best = {"file": os.path.abspath(fn), "line": int(m.group(2)), "function": m.group(3)}
    if best:
        best["code"] = linecache.getline(best["file"], best["line"]).strip()
    return best


def _restore_step_start(cap: dict[str, Any], root: torch.nn.Module) -> None:
    """Buffers and RNG as the captured step started (parameters have not moved before
    its optimizer step)."""
    if "buffers" in cap:
        with torch.no_grad():
            for n, b in root.named_buffers():
                if n in cap["buffers"]:
                    b.copy_(cap["buffers"][n])
    set_rng_state(cap["rng"])


def replay_step(model: StepModel, brk: Any = None, frame: FrameType | None = None) -> dict[str, Any]:
    """Replay the captured step of the break `brk` (paused in the user's `frame`); return a
    plain-data report (the `replay` event body)."""
    cap = model.capture
    root, args = cap.get("root"), cap.get("args")
    result: dict[str, Any] = {
        "step": cap.get("step", model.step),
        "phase": brk.phase if brk else None,
        "first_nonfinite": None,
    }
    if root is None or args is None:
        result["summary"] = "nothing to replay: no model forward was seen in this step"
        return result
    t0 = time.perf_counter()
    modules = _ModuleStack(root)
    mode = _FirstNonFinite(modules)
    grad_out = cap.get("grad_output")
    params = [p for p in root.parameters() if p.requires_grad]
    notes: list[str] = []
    if brk is not None and brk.phase == "after_optimizer_step":
        notes.append("the update was already applied: parameters differ from the step's start")
    with preserved_state(model), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _restore_step_start(cap, root)
        out = None
        with torch.enable_grad(), torch.autograd.detect_anomaly(check_nan=False):
            try:
                with modules, mode:
                    out = root(*args, **cap.get("kwargs", {}))
            except Exception as e:
                result["forward_error"] = f"{type(e).__name__}: {e}"
            result["ops_seen"] = mode.ops
            if mode.first is not None:
                result["first_nonfinite"] = mode.first
            out_t = _first_tensor(out)
            if mode.first is None and out_t is not None and out_t.grad_fn is not None:
                if grad_out is None:
                    notes.append("backward not replayed: no gradient was captured at the model output "
                                 "(arm replay with --on-break replay or from a front end)")
                elif not _finite(grad_out):
                    notes.append("the gradient reaching the model output is non-finite: it was born in the loss")
                else:
                    result["first_nonfinite"] = _replay_backward(out_t, grad_out, params, mode, result)
        if result["first_nonfinite"] is None:
            loss = cap.get("loss")
            if loss is not None and loss.grad_fn is not None and brk is not None and brk.phase == "before_backward":
                try:
                    result["first_nonfinite"] = _search_loss_graph(loss, cap.get("output"), frame)
                except RuntimeError as e:  # saved tensors already freed
                    notes.append(f"the loss graph could not be searched: {str(e).splitlines()[0]}")
        result["anomaly_warnings"] = [str(w.message).splitlines()[0] for w in caught
                                      if "Error detected" in str(w.message)][:5]
    result["seconds"] = round(time.perf_counter() - t0, 4)
    if notes:
        result["notes"] = notes
    first = result["first_nonfinite"]
    if first:
        where = f"{first.get('file')}:{first.get('line')}" if first.get("line") else "an unknown line"
        result["summary"] = (f"{first['op']} in {first.get('module') or 'the loss computation'} "
                             f"produced the first non-finite value ({first['where']}), at {where}")
    elif "failing_op" in result:
        f = result["failing_op"]
        result["summary"] = (f"backward failed in {f['op']}, whose forward ran in {f.get('module') or '?'} "
                             f"at {f.get('file')}:{f.get('line')}: {result['error']}")
    elif "error" in result:
        result["summary"] = result["error"]
    else:
        result["summary"] = "the replay produced no non-finite value" + (f" ({'; '.join(notes)})" if notes else "")
    return result


def _replay_backward(out_t: torch.Tensor, grad_out: torch.Tensor, params: list[torch.Tensor],
                     mode: _FirstNonFinite, result: dict[str, Any]) -> dict[str, Any] | None:
    nodes = _graph_nodes(out_t.grad_fn)
    handles, found = _hook_nodes(nodes)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.autograd.grad(out_t, params, grad_out, allow_unused=True)
    except RuntimeError as e:
        result["error"] = str(e).splitlines()[0]
        # Anomaly mode names the failing backward node, with its forward stack, in a warning.
        text = "\n".join(str(w.message) for w in caught) + "\n" + str(e)
        m = re.search(r"(?:Error detected in|Function) '?(\w+Backward\w*)'?", text)
        if m:
            node = next((n for n in nodes if n.name() == m.group(1)), None)
            trace = node.metadata.get("traceback_") if node is not None else None
            where = _user_line_from_trace(trace or [text])
            module, mtype = _module_at(mode, where)
            result["failing_op"] = {"where": "backward", "module": module, "module_type": mtype,
                                    "op": m.group(1), **(where or {})}
    finally:
        for h in handles:
            h.remove()
    if not found:
        return None
    node = found[0]["node"]
    trace = node.metadata.get("traceback_")
    where = _user_line_from_trace(trace) if trace else None
    module, mtype = _module_at(mode, where)
    return {"where": "backward", "module": module, "module_type": mtype, "op": found[0]["name"],
            **(where or {}), "forward_trace": [ln.strip() for ln in (trace or [])][-6:]}


def _module_at(mode: _FirstNonFinite, where: dict[str, Any] | None) -> tuple[str | None, str | None]:
    if not where:
        return None, None
    return mode.line_module.get((where["file"], where["line"]), (None, None))


def _search_loss_graph(loss: torch.Tensor, output: Any, frame: FrameType | None) -> dict[str, Any] | None:
    """Name the op in the loss computation that made the loss non-finite."""
    out_t = _first_tensor(output)
    stop = {id(out_t.grad_fn)} if out_t is not None and out_t.grad_fn is not None else set()
    nodes = [n for n in _graph_nodes(loss.grad_fn, stop) if id(n) not in stop]
    producer = None
    # Forward evidence: a node whose saved inputs are finite and saved result is not.
    for n in reversed(nodes):  # from the leaves towards the loss
        saved = {a: getattr(n, a, None) for a in dir(n) if a.startswith("_saved_")}
        tensors = {k: v for k, v in saved.items() if isinstance(v, torch.Tensor)}
        res = tensors.pop("_saved_result", None)
        if res is not None and not _finite(res) and _finite(list(tensors.values())):
            producer = n
            break
    if producer is None and out_t is not None:
        handles, found = _hook_nodes(nodes)
        try:
            torch.autograd.grad(loss, [out_t], retain_graph=True, allow_unused=True)
        except RuntimeError:
            pass
        finally:
            for h in handles:
                h.remove()
        producer = found[0]["node"] if found else None
    if producer is None:
        return None
    op = producer.name()
    where = _guess_line(op, frame)
    return {"where": "loss", "module": None, "module_type": None, "op": op, **where}


def _guess_line(op: str, frame: FrameType | None) -> dict[str, Any]:
    """The user line that most likely ran `op`: the backward-calling function is searched."""
    if frame is None:
        return {}
    name = re.sub(r"Backward\d*$", "", op).lower()
    code = frame.f_code
    first = code.co_firstlineno
    pattern = re.compile(rf"\b{re.escape(name)}\w*\s*\(|\.{re.escape(name)}\w*\s*\(", re.I)
    hits = [n for n in range(first, frame.f_lineno + 1)
            if pattern.search(linecache.getline(code.co_filename, n))]
    if not hits:
        return {"file": os.path.abspath(code.co_filename), "line": None, "function": code.co_name}
    line = hits[-1]
    return {"file": os.path.abspath(code.co_filename), "line": line, "function": code.co_name,
            "code": linecache.getline(code.co_filename, line).strip(), "line_from": "source search"}


def replay_twice(model: StepModel, before_each: Any = None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Run the captured step's forward (and backward, if the output gradient was captured)
    twice from the step's starting state; the outputs and parameter gradients of each.
    The model, its gradients, buffers and RNG are as they were afterwards."""
    cap = model.capture
    root, args = cap.get("root"), cap.get("args")
    if root is None or args is None:
        return None, None
    params = [p for p in root.parameters() if p.requires_grad]
    runs = []
    with preserved_state(model):
        for _ in range(2):
            if before_each is not None:
                before_each()
            _restore_step_start(cap, root)
            with torch.enable_grad():
                out = _first_tensor(root(*args, **cap.get("kwargs", {})))
                grads: list[torch.Tensor] = []
                g_out = cap.get("grad_output")
                if out is not None and out.grad_fn is not None and g_out is not None and g_out.shape == out.shape:
                    grads = [g for g in torch.autograd.grad(out, params, g_out, allow_unused=True) if g is not None]
            runs.append({"output": [out.detach()] if out is not None else [], "grads": grads})
    return runs[0], runs[1]
