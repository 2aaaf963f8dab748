"""The diff at a pause: the paused step run twice from the same state, and where the two
runs part (the `diff` op, the console's `diff`, the TUI's D, the doctor's
`nondeterministic` finding).

As replay.py runs a step again: the root module's forward on the captured inputs, with
torch's RNG as the step started and copies of its buffers; then, where the gradient at the
model's output was captured, its backward. Each run's module calls are fingerprinted
(calls.py) and the two records compared in order (stepdbg/wire/step_diff.py): the first
module call whose input or output differs, or the first gradient. Then a second, narrow
pair of runs looks inside that module alone: every op's output (and inputs), and every
draw from randomness a replay does not put back (randomness.py). The answer names the
module, the op and its line, and which randomness moved: Python's ``random``, numpy, a
``torch.Generator`` of the model's own, OS entropy, or, when the op's inputs were the
same, a nondeterministic kernel.

Cost: four forwards (and up to two backwards) of the step, at most `max_calls` module
calls and `max_ops` ops fingerprinted per run (a few hundred bytes each). The model's
parameters, gradients, buffers, modes and every RNG found are as they were afterwards.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from stepdbg.agent.diff.calls import CallLog
from stepdbg.agent.diff.fingerprint import fingerprint, tensors_in
from stepdbg.agent.diff.randomness import TORCH_GEN, Draws, Others
from stepdbg.agent.measure.frames import user_frame, where_of
from stepdbg.agent.measure.tensors import output_at, sharded_across_ranks
from stepdbg.agent.replay.rerun import eager_root, preserved_state, restore_step_start, run_root
from stepdbg.agent.step import backward_capture
from stepdbg.agent.step.hooks import own_id
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.diff_randomness import randomness_of, randomness_words
from stepdbg.wire.step_diff import Record, first_divergence, short_path

MAX_CALLS = 4096  # module calls fingerprinted per run
MAX_OPS = 20_000  # ops fingerprinted inside the module that differs, per run


class OpWatch(TorchFunctionMode):
    """Every op of a run: the generator it draws from (always), and while `inside` (the
    module that differs is running) its output's and inputs' fingerprints and its line."""

    def __init__(self, others: Others, max_ops: int) -> None:
        super().__init__()
        self.others, self.max_ops = others, max_ops
        self.inside = 0
        self.off = 0  # stepdbg's own work in a hook (fingerprints): not the step's ops
        self.ops: list[dict[str, Any]] = []
        self.left_out = 0
        self.draws: Draws | None = None

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        gen = kwargs.get("generator")
        if isinstance(gen, torch.Generator) and gen is not torch.default_generator:
            self.others.saw_generator(gen)
        if not self.inside or self.off:
            return func(*args, **kwargs)
        frame = user_frame(sys._getframe(1))
        if self.draws is not None:
            self.draws.check(frame)
        if isinstance(gen, torch.Generator) and gen is not torch.default_generator and self.draws is not None:
            self.draws.note(TORCH_GEN, f"torch.{_name(func)}(generator=...) (seed {gen.initial_seed()})", frame)
        if len(self.ops) >= self.max_ops:
            self.left_out += 1
            return func(*args, **kwargs)
        ins = [fingerprint(t).get("hash") for t in tensors_in([list(args), kwargs])]
        plain = [repr(a)[:100] for a in args if isinstance(a, (int, float, bool))]
        out = func(*args, **kwargs)
        where = where_of(frame) or {}
        self.ops.append({"op": _name(func), "in": [*ins, *plain], "out": [fingerprint(t) for t in tensors_in(out)],
                         "file": where.get("file"), "line": where.get("line"), "code": where.get("code")})
        return out


def _name(func: Any) -> str:
    return getattr(func, "__name__", None) or str(func)


def step_twice(model: StepModel, max_calls: int = MAX_CALLS, max_ops: int = MAX_OPS) -> dict[str, Any]:
    """Run the captured step twice from its start; where the runs part, in plain data."""
    cap = model.capture
    backward_capture.settle(cap)  # (of several outputs, the gradient the backward starts from, as the replay's)
    root, args = eager_root(model), cap.get("args")
    step = cap.get("step", model.step)
    result: dict[str, Any] = {"step": step, "checked": False, "first_divergence": None, "randomness": [],
                              "moved": [], "runs": 0}
    if root is None or args is None:
        return {**result, "summary": "nothing to compare: no model forward was seen in this step"}
    shards = sharded_across_ranks(root)
    if shards is not None:
        return {**result, "summary": f"not compared: {shards}; its forward gathers them from every rank"}
    t0 = time.perf_counter()
    others = Others(root)
    names = {id(m): n for n, m in root.named_modules()}
    watch = OpWatch(others, max_ops)
    try:
        with preserved_state(model):
            first = run_recorded(root, cap, step, names, max_calls, watch)
            result["moved"] = others.moved()
            second = run_recorded(root, cap, step, names, max_calls, watch)
            result["runs"] = 2
            found = first_divergence(_record(step, first), _record(step, second), [step])
            if found is not None and found["phase"] == "forward":
                target = _module(root, found["module"])
                runs = [run_recorded(root, cap, step, names, max_calls, watch, target) for _ in range(2)]
                result["runs"] = 4
                found["op"] = _first_op(runs[0][1], runs[1][1])
                result["randomness"] = runs[0][2] or runs[1][2]
                result["ops_left_out"] = watch.left_out
    except Exception as e:  # noqa: BLE001 - the job goes on; the answer says why there is none
        others.rewind()
        first_line = str(e).splitlines()[0] if str(e) else ""
        return {**result, "summary": f"not compared: the step's forward failed when run again "
                                     f"({type(e).__name__}: {first_line})"}
    others.rewind()
    result.update(checked=True, first_divergence=found, fingerprints=len(first[0]),
                  gradients=any(e["phase"] == "backward" for e in first[0]),
                  seconds=round(time.perf_counter() - t0, 4))
    result["randomness"] = randomness_of(found, result["randomness"], result["moved"])
    result["summary"] = _summary(result)
    return result


def run_recorded(root: torch.nn.Module, cap: dict[str, Any], step: int, names: dict[int, str], max_calls: int,
         watch: OpWatch, target: torch.nn.Module | None = None
         ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """One run from the step's start: its module-call entries (then its gradients), and,
    with a `target` module, the ops inside it and the draws it made."""
    from torch.nn.modules import module as nn_module

    site = cap.get("called_from")
    log = CallLog(max_calls, lambda m: names.get(id(m)), (site[0], site[1]) if site else None)
    log.reset(step)
    watch.ops, watch.inside = [], 0
    draws = watch.draws = Draws() if target is not None else None

    def pre(m: torch.nn.Module, a: tuple[Any, ...]) -> None:
        watch.off += 1
        try:
            log.call_input(m, a)
        finally:
            watch.off -= 1
        if m is target:
            watch.inside += 1
            if watch.inside == 1 and draws is not None:
                draws.start()

    def post(m: torch.nn.Module, a: tuple[Any, ...], out: Any) -> None:
        if m is target and watch.inside:
            watch.inside -= 1
            if watch.inside == 0 and draws is not None:
                draws.stop()
        watch.off += 1
        try:
            log.call_output(m, out)
        finally:
            watch.off -= 1

    restore_step_start(cap)
    handles = [own_id(nn_module.register_module_forward_pre_hook(pre)),
               own_id(nn_module.register_module_forward_hook(post, always_call=True))]
    try:
        with torch.enable_grad(), watch:
            out = run_root(root, cap)
    finally:
        for h in handles:
            h.remove()
        if watch.inside and draws is not None:
            draws.stop()
        watch.inside, watch.draws = 0, None
    if target is None:
        _gradients(root, log, output_at(out, cap.get("grad_output_at")), cap.get("grad_output"))
    return log.entries, watch.ops, draws.found if draws is not None else []


def _gradients(root: torch.nn.Module, log: CallLog, out: torch.Tensor | None, g_out: Any) -> None:
    """The parameters' gradients from the gradient captured at the model's output (.grad untouched)."""
    if out is None or out.grad_fn is None or not isinstance(g_out, torch.Tensor) or g_out.shape != out.shape:
        return
    named = [(n, p) for n, p in root.named_parameters() if p.requires_grad]
    grads = torch.autograd.grad(out, [p for _, p in named], g_out, allow_unused=True)
    for (n, _), g in zip(named, grads, strict=True):
        owner, _, leaf = n.rpartition(".")
        log.add("backward", owner, f"{leaf}.grad", 0, g)


def _record(step: int, run: tuple[list[dict[str, Any]], Any, Any]) -> Record:
    return Record(steps={step: run[0]}, step_lines={step: {}})


def _module(root: torch.nn.Module, name: str) -> torch.nn.Module:
    try:
        return root.get_submodule(name) if name else root
    except AttributeError:
        return root


def _first_op(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first op inside the module whose output differs between the runs; whether its
    inputs were the same (then the op itself made the difference)."""
    for x, y in zip(a, b, strict=False):
        if x["op"] != y["op"] or [f.get("hash") for f in x["out"]] != [f.get("hash") for f in y["out"]]:
            return {"name": x["op"], "file": x["file"], "line": x["line"], "code": x["code"],
                    "same_inputs": x["in"] == y["in"] and x["op"] == y["op"]}
    return None


def _summary(r: dict[str, Any]) -> str:
    if r["first_divergence"] is None:
        return (f"step {r['step']} run twice from the same state gives the same module outputs"
                f"{' and gradients' if r.get('gradients') else ''}, bitwise ({r['fingerprints']} fingerprints)")
    return f"step {r['step']} run twice from the same state {parting_words(r)}"


def parting_words(r: dict[str, Any]) -> str:
    """Where the two runs of a step_twice answer part, and why, in words ('differs first in
    layers.1.mlp's own code ...: add at m.py:44; randomness: python random: random.gauss at
    m.py:44'); the doctor's `nondeterministic` finding says it too."""
    d = r["first_divergence"]
    cls = f" ({d['class']})" if d.get("class") else ""
    what = f"'s own code (the {d['what']} of {d['input_of']})" if d.get("input_of") else f"{cls}, {d['what']}"
    text = f"differs first in {'module ' + d['module'] if d['module'] else 'the model'}{what}"
    op = d.get("op")
    if op is not None:
        text += f": {op['name']} at {short_path(op['file'])}:{op['line']}"
    elif d.get("file"):
        text += f", called at {short_path(d['file'])}:{d['line']}"
    if d.get("max_abs") is not None:
        text += f" (max |A-B| {d['max_abs']:g})"
    return f"{text}; {randomness_words(r['randomness'])}"
