"""Replay a step to find the op, module and line that produced the first non-finite value.

In order (docs/replay.md, "Replay"):

- inputs first: a non-finite value already in the batch or the model's inputs is born in
  the data (the tensor, the index of its first bad element, the count, the dataset index
  when a map-style DataLoader gave the batch);
- forward: the paused step's model forward runs again on the same inputs, with the RNG
  state and buffers the step started with, under ``torch.autograd.detect_anomaly`` and
  provenance.py's TorchFunctionMode, which names the op whose NaN or unintended inf
  reaches the output, on the module instance that ran it;
- targets: with a finite output, a non-finite target as the loss sees it is data-born too;
- backward: the gradient captured at the model output during the real backward is fed
  back through the replayed graph (``torch.autograd.grad``, so ``.grad`` is untouched);
  hooks on every node find the first node with finite incoming and non-finite outgoing
  gradients, attributed to the module instance whose forward op made it;
- loss: when the model output is finite and the loss is not, the loss graph (alive before
  backward) is searched through its saved tensors and gradients.

advice.py then says what to do from the cause. Model parameters, buffers, gradients, RNG
state and train/eval modes are as they were when the replay returns.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure import rank_origin, warning_filters
from stepdbg.agent.measure.frames import only_argument, site_where, variable_holding, where_of
from stepdbg.agent.measure.tensors import as_float, output_at, sharded_across_ranks
from stepdbg.agent.replay import fed_backward, grad_paths
from stepdbg.agent.replay.advice import advise
from stepdbg.agent.replay.autograd_graph import (
    finite,
    graph_nodes,
    hook_nodes,
    loss_names,
    made_by,
    no_gradient_words,
    outputs_beside,
    search_loss_graph,
    user_trace,
)
from stepdbg.agent.replay.param_writes import annotate
from stepdbg.agent.replay.provenance import ModuleStack, Provenance, first_bad, named_tensors
from stepdbg.agent.replay.rerun import (
    eager_root,
    forward_error,
    preserved_state,
    restore_step_start,
    run_root,
    shown_origin,
)
from stepdbg.agent.replay.upstream import born_in_program, born_upstream, fed_words
from stepdbg.agent.replay.verdict import CLIP_OVERFLOWED, judge, many_ranks, reproduced
from stepdbg.agent.step import backward_capture
from stepdbg.agent.step.step_model import StepModel


def replay_step(model: StepModel, brk: Any = None, frame: FrameType | None = None,
                together: Callable[[], str | None] | None = None,
                agree: Callable[[bool], bool] | None = None) -> dict[str, Any]:
    """Replay the captured step of the break `brk` (paused in the user's `frame`); return a
    plain-data report (the `replay` event body). The provenance rules are in provenance.py.

    A sharded model's forward gathers its parameters from every rank: it is replayed only
    when `together()` says every rank joined (None), each rank running its own step's
    forward at the same pause, so that the collectives match; then its backward, to the
    gradients of the parameters it gathered (torch.autograd.grad: the real, sharded
    gradients are untouched), only where `agree(ready)` says every rank can run it."""
    cap = model.capture
    backward_capture.settle(cap)  # (of several outputs, the one the backward starts from)
    root, args = eager_root(model), cap.get("args")
    result: dict[str, Any] = {"step": cap.get("step", model.step), "phase": brk.phase if brk else None,
                              "first_nonfinite": None}
    if root is None or args is None:
        result["summary"] = "nothing to replay: no model forward was seen in this step"
        return result
    t0 = time.perf_counter()
    kwargs = cap.get("kwargs", {})
    first = _input_born(cap, args, kwargs, model.caller.frame or frame)  # (no forward: a sharded model too)
    first = born_upstream(model, cap, first, frame, _input_born)  # (a GAN's netD fed netG's output)
    first = born_in_program(model, cap, first, model.caller.frame or frame)  # (or a log of it, taken between)
    shards = sharded_across_ranks(root) if first is None else None
    if shards is not None:
        why = together() if together is not None else "this rank would replay alone"
        if why:
            result["summary"] = (f"not replayed: {shards}; its forward gathers them from every rank, and {why} "
                                 "(its inputs are finite; replay from the job's console or TUI, which asks every "
                                 "rank at once)")
            return result
        result["ranks_together"] = True
    notes: list[str] = []
    if brk is not None and brk.phase == "after_optimizer_step":
        notes.append("the update was already applied: parameters differ from the step's start")
    original = model.output()  # (a bundle's replay has no output, but whether it was finite)
    original_finite = finite(original) if original is not None else cap.get("output_finite")
    if first is None:
        first = _replayed(model, root, args, kwargs, cap, brk, frame, result, notes, original_finite,
                          agree=(agree or (lambda ready: False)) if shards is not None else None)
        _judged_together(shards is not None and agree is not None, agree, first, result["step"])
    result["first_nonfinite"], result["micro_batches"] = first, getattr(getattr(model, "current", None), "forwards", 1)
    annotate(first, root.parameters(), model, result["step"])  # (a parameter not made so by an update: written)
    clip = getattr(getattr(model, "current", None), "clip_norm", None)  # (what clip_grad_norm_ returned this step)
    result["clip_norm"] = as_float(clip) if clip is not None else None
    if first is None and result.get("backward_replayed") and result.get("replayed_output_finite") \
            and not many_ranks(brk):  # (another rank's NaN, all-reduced, fills every gradient too)
        origin = grad_paths.explain(root, model.root_name(root, frame), cap, model.caller.frame or frame, clip, frame)
        if origin == grad_paths.CUT:
            notes.append(f"the loss's graph is larger than {grad_paths.MOST_NODES:,} nodes: its paths into the "
                         "parameters were not read")
            result["graph_cut"] = True
        elif origin is not None:
            result["grad_origin"] = origin
    judge(result, brk, list(model.history), list(root.parameters()), original_finite)
    result["advice"] = advise(first, model.history, list(root.parameters()), optimizer=bool(model.optimizers),
                              clip_overflowed=str(result.get("verdict", "")).startswith(CLIP_OVERFLOWED[:40])) \
        or result.get("grad_origin", {}).get("advice")
    result["seconds"] = round(time.perf_counter() - t0, 4)
    if notes:
        result["notes"] = notes
    result["summary"] = _summary(result, notes)
    return result


def replay_inputs(cap: dict[str, Any], brk: Any) -> dict[str, Any]:
    """The inputs' check alone (a bundle of a sharded model holds no parameters to run)."""
    first = _input_born(cap, cap.get("args"), cap.get("kwargs", {}), None)
    result = {"step": cap.get("step"), "phase": brk.phase if brk else None, "first_nonfinite": first,
              "reproduced": True if first else None, "verdict": reproduced(first) if first else None}
    result["summary"] = _summary(result, []) if first else (
        "not replayed: the model's parameters were sharded across ranks (not in the bundle); its inputs are finite")
    return result


def replay_words(result: dict[str, Any]) -> str:
    """A replay's report in words, as the job's stderr and `stepdbg replay` say it."""
    first, advice = result.get("first_nonfinite"), result.get("advice")
    return (f"replay of step {result['step']}: {result['summary']}"
            + (f"\n  {first['code']}" if first and first.get("code") else "")
            + (f"\n  {advice['cause']}: {advice['text']}" if advice else "")
            + (f"\n  {result['verdict']}" if result.get("verdict") else ""))


def _input_born(cap: dict[str, Any], args: Any, kwargs: Any, frame: FrameType | None) -> dict[str, Any] | None:
    """A non-finite value already in the batch or the model's inputs: born in the data. It
    is named by the user's variable that holds it (`x`, not stepdbg's `batch`), where the
    paused frame has one, at the line that called the model with it."""
    named = list(itertools.chain(named_tensors(cap.get("batch"), "batch"), named_tensors(args, "args"),
                                 named_tensors(kwargs, "kwargs")))
    bad = first_bad(iter(named))
    if bad is None:
        return None
    held = dict(named)[bad["tensor"]]
    own = variable_holding(held, frame)
    if own is None and bad["tensor"] == "batch" and cap.get("called_from"):  # (a bundle's: no frame, the call's code)
        own = only_argument(site_where(cap["called_from"])["code"])
    if own is not None:
        bad["tensor"], bad["as"] = own, bad["tensor"]
    indices = cap.get("sample_indices")
    if isinstance(indices, list) and bad["index"] and bad["shape"] and bad["shape"][0] == len(indices):
        bad["sample"] = indices[bad["index"][0]]  # the dataset index of the bad row (a map-style dataset)
    site = cap.get("called_from")
    where = site_where(site) if site else where_of(frame)
    return {"where": "input", "module": None, "module_type": None, "op": None, **bad, **(where or {})}


def _replayed(model: StepModel, root: torch.nn.Module, args: Any, kwargs: Any, cap: dict[str, Any], brk: Any,  # noqa: C901 - the replay's stages in order (forward, loss, backward), each with its own way to find the producer
              frame: FrameType | None, result: dict[str, Any], notes: list[str],
              original_finite: bool | None, agree: Callable[[bool], bool] | None = None) -> dict[str, Any] | None:
    """Forward under Provenance; then the targets, the backward, the loss graph. A forward
    that fails blames nothing; the loss graph is searched only when the step's own output
    was finite (a non-finite output the replay does not make again is not the loss's).
    `agree`: a sharded model's, every rank replaying together: asked once on every path
    whether this rank can replay the backward; it runs where every rank can."""
    prefix = result["replayed_model"] = model.root_name(root, frame)  # (a GAN's netG: told apart from netD)
    names = {id(t): ".".join(filter(None, (prefix, n)))
             for n, t in itertools.chain(root.named_parameters(), root.named_buffers())}
    modules = ModuleStack(root, prefix)
    prov = Provenance(modules, names, called_at=cap.get("called_from"))
    first = None
    with preserved_state(model), warning_filters.recorded() as caught:
        restore_step_start(cap)
        out = None
        grad_out = None  # (set where this rank can replay the backward)
        with torch.enable_grad(), torch.autograd.detect_anomaly(check_nan=False):
            try:
                with modules, prov:
                    out = run_root(root, cap)
            except Exception as e:
                result["forward_error"] = forward_error(e, root)
            result["ops_seen"] = prov.ops
            if "forward_error" in result:
                if agree is not None:
                    agree(False)
                return None  # (what it saw before failing is not the step's: nothing is blamed)
            first = shown_origin(prov.producer_of(out))
            out_t = output_at(out, cap.get("grad_output_at"))  # (the output the loss reached: (features, logits))
            result["replayed_output_finite"] = finite(out)
            if first is None and out_t is not None and finite(out):
                loss = cap.get("loss")
                targets = _nonfinite_target(loss, out_t) if loss is not None else None
                if targets is not None:
                    first = {"where": "input", "module": None, "module_type": None, "op": None, **targets,
                             **(where_of(frame) or {})}
                elif out_t.grad_fn is not None:
                    grad_out = cap.get("grad_output")
                    if grad_out is None and brk is not None and brk.phase in ("after_backward", "before_optimizer_step",
                                                                              "after_optimizer_step"):
                        notes.append(no_gradient_words(cap))
                    elif grad_out is not None and (beside := outputs_beside(cap)):  # (before the backward: none)
                        result["backward_partial"] = True
                        notes.append(f"the loss reached the model's outputs {' and '.join(map(str, beside))}: "
                                     f"the backward is replayed from output {cap.get('grad_output_at')}'s gradient only")
                    if grad_out is not None and not finite(grad_out):
                        notes.append("the gradient reaching the model output is non-finite: it was born in the loss")
                        grad_out = None
            if _agreed(agree, grad_out is not None and first is None and out_t is not None, notes):
                params = [p for p in root.parameters() if p.requires_grad] if agree is None else None
                first = _replay_backward(out_t, grad_out, params, prov, result)
                result["backward_replayed"] = "error" not in result
                if first is None and agree is None and result["backward_replayed"]:  # (a GAN's netG's backward)
                    first = fed_backward.through_feeder(model, root, cap, frame, result, notes, _replay_backward)
        if first is None and original_finite is not False and agree is None:
            first = _in_loss_graph(model, cap, brk, frame, notes)
        result["anomaly_warnings"] = [str(w.message).splitlines()[0] for w in caught
                                      if "Error detected" in str(w.message)][:5]
    return first


def _judged_together(together: bool, agree: Callable[[bool], bool] | None, first: Any, step: Any) -> None:
    """Ranks replaying together: every rank's finding is in the store (rank_origin) before
    any of them judges where the value came from (a barrier: agree, all ready)."""
    if together and agree is not None:
        if first is not None:
            rank_origin.publish(step)
        agree(True)


def _agreed(agree: Callable[[bool], bool] | None, ready: bool, notes: list[str]) -> bool:
    """Whether to replay the backward: where this rank is `ready`; a sharded model's, where
    every rank is (ranks.agree: every rank runs it, or none, so no collective waits)."""
    if agree is None:
        return ready
    go = agree(ready)
    notes.append("every rank ran its forward and backward together (a sharded model)" if go else
                 "every rank ran its forward together (a sharded model); the backward is not replayed"
                 + (": another rank could not" if ready else ""))
    return go


def _in_loss_graph(model: StepModel, cap: dict[str, Any], brk: Any, frame: FrameType | None,
                   notes: list[str]) -> dict[str, Any] | None:
    """The op of the loss computation that made the loss non-finite (its graph lives until the backward)."""
    loss = cap.get("loss")
    if loss is not None and loss.grad_fn is not None and brk is not None and brk.phase == "before_backward":
        try:
            return search_loss_graph(loss, model.output(), frame)
        except RuntimeError as e:  # saved tensors already freed
            notes.append(f"the loss graph could not be searched: {str(e).splitlines()[0]}")
    elif loss is not None and brk is not None and isinstance(brk.scalars.get("loss"), float) \
            and not math.isfinite(brk.scalars["loss"]):
        notes.append("the loss was read after its backward (the step's one read, --skip-on-device), "
                     "which freed the loss graph: the op in the loss computation is not named")
    return None


def _nonfinite_target(loss: torch.Tensor, out_t: torch.Tensor) -> dict[str, Any] | None:
    """A non-finite target as the loss sees it: a tensor saved by a loss node that does not
    come from the model (the labels; a target of 1e200, which is inf in float32)."""
    if loss.grad_fn is None:
        return None
    stop = {id(out_t.grad_fn)} if out_t.grad_fn is not None else set()
    for node in graph_nodes(loss.grad_fn, stop):
        if id(node) in stop:
            continue
        for attr in dir(node):
            if not attr.startswith("_saved_"):
                continue
            try:
                v = getattr(node, attr)
            except RuntimeError:  # freed
                continue
            if isinstance(v, torch.Tensor) and not v.requires_grad and v.dim():  # (a 0-d one: a number written)
                bad = first_bad(iter([(f"the {attr.removeprefix('_saved_')} of {node.name()}", v)]))
                if bad is not None:
                    return bad
    return None


def _summary(result: dict[str, Any], notes: list[str]) -> str:
    first = result["first_nonfinite"]
    if first and first["where"] == "input":
        sample = f" (dataset index {first['sample']})" if first.get("sample") is not None else ""
        return (f"{'the data, a model or the ops between' if first.get('computed') else 'the data'}: "
                f"{first['tensor']} already holds {first['count']} non-finite "
                f"value{'s' if first['count'] != 1 else ''}, the first at "
                f"{first['index']}{sample}{fed_words(first)}")
    if first and first.get("written_after"):
        where = f"{first.get('file')}:{first.get('line')}" if first.get("line") else "an unknown line"
        return (f"{first['op']} in the program's own code wrote {first.get('tensor')}'s non-finite values after "
                f"{first['written_after']} made them, at {where}: {first.get('tensor')} holds "
                f"{first['written_after']}'s output's memory, and {first['written_after']}'s forward, replayed from "
                "the same state, makes it finite; not the data")
    if first and first["where"] == "program":
        where = f"{first.get('file')}:{first.get('line')}" if first.get("line") else "an unknown line"
        return (f"{first['op']} in the program's own code produced the first non-finite value, at {where}: "
                f"{first.get('tensor')}, {first.get('into') or 'the model'}'s input, is computed from a model's "
                "output or parameters, not the data")
    if first and first["where"] == "parameter":
        return f"parameter {first.get('tensor')} was already non-finite before this step ({first.get('written') or 'an earlier update'})"
    if first:
        where = f"{first.get('file')}:{first.get('line')}" if first.get("line") else "an unknown line"
        module = first.get("module") or "the loss computation"
        mtype = f" ({first['module_type']})" if first.get("module_type") and first["module_type"] != module else ""
        op = f"{first['op']} ({first['node']})" if first["where"] in ("backward", "loss") and first.get("node") \
            else first["op"]
        return f"{op} in {module}{mtype} produced the first non-finite value ({first['where']}), at {where}{fed_words(first)}"
    if "grad_origin" in result:
        return result["grad_origin"]["summary"]
    if "failing_op" in result:
        f = result["failing_op"]
        return (f"backward failed in {f['op']}, whose forward ran in {f.get('module') or '?'} "
                f"at {f.get('file')}:{f.get('line')}: {result['error']}")
    if "error" in result:
        return result["error"]
    if "forward_error" in result:
        return f"the replay's own forward failed ({result['forward_error']}): nothing is blamed"
    return "the replay produced no non-finite value" + (f" ({'; '.join(notes)})" if notes else "")


def _replay_backward(out_t: torch.Tensor, grad_out: torch.Tensor, params: list[torch.Tensor] | None,
                     prov: Provenance, result: dict[str, Any]) -> dict[str, Any] | None:
    """The first graph node with finite incoming and non-finite outgoing gradients, on the
    module instance whose forward made it. `params` None: the graph's leaves (a sharded
    model's gathered parameters, which its parameters() are not)."""
    nodes = graph_nodes(out_t.grad_fn)
    if params is None:
        params = [n.variable for n in nodes if isinstance(getattr(n, "variable", None), torch.Tensor)]
    handles, found = hook_nodes(nodes)
    try:
        with warning_filters.recorded() as caught:
            torch.autograd.grad(out_t, params, grad_out, allow_unused=True)
    except RuntimeError as e:
        result["error"] = str(e).splitlines()[0]
        # Anomaly mode names the failing backward node, with its forward stack, in a warning.
        text = "\n".join(str(w.message) for w in caught) + "\n" + str(e)
        m = re.search(r"(?:Error detected in|Function) '?(\w+Backward\w*)'?", text)
        if m:
            node = next((n for n in nodes if n.name() == m.group(1)), None)
            result["failing_op"] = {"where": "backward", "op": m.group(1), **made_by(node, prov, text)}
    finally:
        for h in handles:
            h.remove()
    if not found:
        return None
    node = found[0]["node"]
    # `op` as the program calls it (sqrt), as for an op of the forward; `node`: its backward (SqrtBackward0)
    return {"where": "backward", "op": loss_names(found[0]["name"], None)[0], "node": found[0]["name"],
            **made_by(node, prov, None),
            "forward_trace": user_trace(node.metadata.get("traceback_"))}


def replay_twice(model: StepModel, before_each: Any = None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The captured step's forward (and backward, given the output gradient) twice from the step's
    start: each run's outputs and parameter gradients. The model, its gradients, buffers and RNG are
    as they were afterwards."""
    cap = model.capture
    root, args = eager_root(model), cap.get("args")
    if root is None or args is None:
        return None, None
    if sharded_across_ranks(root) is not None:
        return None, None
    params = [p for p in root.parameters() if p.requires_grad]
    runs = []
    with preserved_state(model):
        for _ in range(2):
            if before_each is not None:
                before_each()
            restore_step_start(cap)
            with torch.enable_grad():
                out = output_at(run_root(root, cap), cap.get("grad_output_at"))
                grads: list[torch.Tensor] = []
                g_out = cap.get("grad_output")
                if out is not None and out.grad_fn is not None and g_out is not None and g_out.shape == out.shape:
                    grads = [g for g in torch.autograd.grad(out, params, g_out, allow_unused=True) if g is not None]
            runs.append({"output": [out.detach()] if out is not None else [], "grads": grads})
    return runs[0], runs[1]
