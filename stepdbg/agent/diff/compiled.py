"""`diff compile` at a pause: the step's forward eagerly and under ``torch.compile``, and
the first module whose output differs (issue 46).

The eager forward runs once on the captured inputs (as replay.py runs it: torch's RNG as
the step started, copies of the buffers, no gradients), recording each module call: its
arguments, its output, torch's RNG state when it started, and the calls inside it. Then,
from the root down, each call is compiled alone (a fresh function around it, so that
dynamo's cache on the user's own code is not touched) and run on the same arguments: the
first of a module's calls whose compiled output differs past the tolerance is where to
look next; a module whose own output differs while each call inside it agrees is the
answer (the difference is in its own code: another path under compile, or another
kernel). Random ops draw as eagerly (``torch._inductor.config.fallback_random``): a
dropout mask is not a difference. Buffers a compiled call writes are put back.

Tolerance: eager and compiled kernels are not bitwise the same; a value differs when
|eager - compiled| > atol + rtol * |eager| (defaults: ATOL, RTOL for float32; HALF_TOL
for float16/bfloat16). Cost: one eager forward (its module calls' arguments and outputs
are held until the answer), one compile per module on the path down and per call
compared on the way (each seconds on a CPU, more under inductor); progress is said.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.diff.fingerprint import tensors_in
from stepdbg.agent.measure.frames import caller_kwargs
from stepdbg.agent.measure.tensors import set_rng_state, sharded_across_ranks
from stepdbg.agent.replay.rerun import eager_root, preserved_state, restore_step_start, run_root
from stepdbg.agent.step.hooks import own_id
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.step_diff import short_path

BACKENDS = ("inductor", "aot_eager", "eager")
ATOL, RTOL = 1e-5, 1e-4  # float32: inductor's fused kernels round differently, well within these
HALF_TOL = 1e-2  # float16 / bfloat16: atol and rtol
MAX_CALLS = 4096  # module calls held from the eager forward
MAX_COMPILES = 64  # compiles on the way down (each a compile of one module)


class Call:
    """One module call of the eager forward."""

    def __init__(self, name: str, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.name, self.module, self.args, self.kwargs = name, module, args, kwargs
        self.rng = torch.default_generator.get_state()
        self.out: Any = None
        self.children: list[Call] = []


def compile_diff(model: StepModel, backend: str = "inductor", say: Callable[[str], None] = lambda _: None
                 ) -> dict[str, Any]:
    """Where the captured step's forward parts eagerly and compiled, in plain data."""
    cap = model.capture
    root, args = eager_root(model), cap.get("args")
    step = cap.get("step", model.step)
    result: dict[str, Any] = {"step": step, "backend": backend, "checked": False, "first_divergence": None}
    if root is None or args is None:
        return {**result, "summary": "nothing to compare: no model forward was seen in this step"}
    if sharded_across_ranks(root) is not None:
        return {**result, "summary": "not compared: the model is sharded across ranks"}
    t0 = time.perf_counter()
    buffers = {n: b.detach().clone() for n, b in root.named_buffers()}
    compiles = [0]

    def again(call: Call) -> dict[str, Any] | None:
        return _differs(call.out, _compiled(call, backend, buffers, root, compiles, say))

    try:
        with preserved_state(model), torch.no_grad():
            path = _walk(_eager(root, cap), again, compiles)
    except Exception as e:  # noqa: BLE001 - the job goes on; the answer says why there is none
        first_line = str(e).splitlines()[0] if str(e) else ""
        return {**result, "summary": f"not compared: {type(e).__name__}: {first_line}"[:2000]}
    finally:
        with torch.no_grad():
            for n, b in root.named_buffers():
                if n in buffers:
                    b.copy_(buffers[n])
    result.update(checked=True, compiles=compiles[0], seconds=round(time.perf_counter() - t0, 2),
                  tolerance={"atol": ATOL, "rtol": RTOL, "half": HALF_TOL})
    how = f"step {step}'s forward under torch.compile (backend {backend})"
    if not path:
        result["summary"] = f"{how} agrees with eager within atol {ATOL:g}, rtol {RTOL:g}"
        return result
    call, last = path[-1]
    code = getattr(type(call.module).forward, "__code__", None)
    d = result["first_divergence"] = {
        **last, "module": call.name, "class": type(call.module).__name__, "path": [c.name for c, _ in path],
        "file": code.co_filename if code else None, "line": code.co_firstlineno if code else None}
    amount = (f"; max |eager-compiled| {d['max_abs']:g}, {d['past']:g}x the tolerance" if d["past"] is not None
              else f"; {d['reason']}")
    result["summary"] = (f"{how} differs first in module {call.name or 'the model'} ({d['class']}, forward at "
                         f"{short_path(d['file'])}:{d['line']}): in its own code, every module it calls agrees{amount}")
    return result


def _walk(top: Call, again: Callable[[Call], dict[str, Any] | None], compiles: list[int]
          ) -> list[tuple[Call, dict[str, Any]]]:
    """From the root down: the calls whose compiled output differs, each inside the last."""
    found = again(top)
    if found is None:
        return []
    path = [(top, found)]
    call = top
    while compiles[0] < MAX_COMPILES:
        for child in call.children:
            d = again(child)
            if d is not None:
                call = child
                path.append((child, d))
                break
        else:
            break
    return path


def _eager(root: torch.nn.Module, cap: dict[str, Any]) -> Call:
    """The eager forward with its module calls as a tree (at most MAX_CALLS)."""
    from torch.nn.modules import module as nn_module

    names = {id(m): n for n, m in root.named_modules()}
    top = Call("", root, tuple(cap["args"]), dict(cap.get("kwargs") or {}))
    stack: list[Call] = []
    count = [0]

    def pre(m: torch.nn.Module, a: tuple[Any, ...]) -> None:
        if id(m) not in names or count[0] >= MAX_CALLS:
            stack.append(None)  # type: ignore[arg-type]
            return
        count[0] += 1
        call = top if not stack and m is root else Call(names[id(m)], m, a, caller_kwargs())
        parent = next((c for c in reversed(stack) if c is not None), None)
        if parent is not None:
            parent.children.append(call)
        stack.append(call)

    def post(m: torch.nn.Module, a: tuple[Any, ...], out: Any) -> None:
        call = stack.pop() if stack else None
        if call is not None:
            call.out = out

    restore_step_start(cap)
    top.rng = cap["rng"]["cpu"]
    handles = [own_id(nn_module.register_module_forward_pre_hook(pre)),
               own_id(nn_module.register_module_forward_hook(post, always_call=True))]
    try:
        out = run_root(root, cap)
    finally:
        for h in handles:
            h.remove()
    top.out = out
    return top


def _compiled(call: Call, backend: str, buffers: dict[str, torch.Tensor], root: torch.nn.Module,
              compiles: list[int], say: Callable[[str], None]) -> Any:
    """`call` again, its module compiled alone, on the same arguments and RNG state."""
    module = call.module

    def run(*a: Any, **kw: Any) -> Any:
        return module(*a, **kw)

    compiles[0] += 1
    say(f"diff compile: compiling {call.name or 'the model'} ({type(module).__name__}, compile {compiles[0]})")
    fresh = types.FunctionType(run.__code__.replace(co_name=f"stepdbg_compiled_{compiles[0]}"), run.__globals__,
                               closure=run.__closure__)
    import torch._inductor.config as inductor_config

    set_rng_state({"cpu": call.rng})
    try:
        with inductor_config.patch(fallback_random=True):
            return torch.compile(fresh, backend=backend, dynamic=False)(*call.args, **call.kwargs)
    finally:
        for n, b in root.named_buffers():
            if n in buffers:
                b.copy_(buffers[n])


def _differs(eager: Any, compiled: Any) -> dict[str, Any] | None:
    """How far `compiled` is from `eager` past the tolerance (max_abs, max_rel, past), or None."""
    xs, ys = tensors_in(eager), tensors_in(compiled)
    if len(xs) != len(ys):
        return {"max_abs": None, "max_rel": None, "past": None, "reason": "another number of outputs"}
    worst: dict[str, Any] | None = None
    for x, y in zip(xs, ys, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return {"max_abs": None, "max_rel": None, "past": None,
                    "reason": f"output {list(x.shape)} {x.dtype} vs {list(y.shape)} {y.dtype}"}
        if not x.is_floating_point():
            if not torch.equal(x, y):
                return {"max_abs": None, "max_rel": None, "past": None, "reason": "integer outputs differ"}
            continue
        tol = HALF_TOL if x.dtype in (torch.float16, torch.bfloat16) else None
        atol, rtol = (tol, tol) if tol else (ATOL, RTOL)
        a, b = x.detach().double().cpu(), y.detach().double().cpu()
        d = (a - b).abs().nan_to_num(nan=0.0)
        past = float((d / (atol + rtol * a.abs())).max()) if d.numel() else 0.0
        if past > 1 and (worst is None or past > worst["past"]):
            worst = {"max_abs": float(d.max()), "max_rel": float((d / a.abs().clamp_min(1e-30)).max()),
                     "past": round(past, 3), "reason": "past the tolerance"}
    return worst
