"""A NaN born in the backward of the model that fed the captured one. A GAN's generator step
(`errG = criterion(netD(fake), label)`, `errG.backward()`, `optimizerG.step()`) captures
netD's forward, whose backward the replay runs again, finite: the gradients that are not
finite are netG's, made where the backward went on from netD's input into netG's graph (a
sqrt of |h| at 0). Replaying netD alone, the step looked transient.

Where the captured forward's input is another model's kept output (step/upstream.py) and
that model's parameters hold the non-finite gradients, its forward runs again from its own
inputs and RNG state, the captured model's forward and backward run on that output (a leaf
here) to give the gradient that reached it, and the feeding model's backward is replayed
from it, under the same rules as the captured model's (replay._replay_backward).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure import warning_filters
from stepdbg.agent.measure.frames import variable_holding
from stepdbg.agent.measure.tensors import output_at, set_rng_state
from stepdbg.agent.replay.autograd_graph import finite
from stepdbg.agent.replay.provenance import ModuleStack, Provenance
from stepdbg.agent.replay.rerun import preserved_state, restore_step_start, run_root, unwrapped
from stepdbg.agent.step.upstream import alive

Backward = Callable[[torch.Tensor, torch.Tensor, list[torch.Tensor], Provenance, dict[str, Any]],
                    dict[str, Any] | None]


def through_feeder(model: Any, root: torch.nn.Module, cap: dict[str, Any], frame: FrameType | None,
                   result: dict[str, Any], notes: list[str], backward: Backward) -> dict[str, Any] | None:
    """The producer in the feeding model's backward, or None (no feeding model holds the
    non-finite gradients, or its backward, replayed, stays finite)."""
    grad_out = cap.get("grad_output")
    if grad_out is None or not finite(grad_out):
        return None
    for record in list((cap.get("upstream") or {}).values()):
        feeder = alive(record.get("root"))
        out = alive(record.get("output"))
        if feeder is None or feeder is root or not isinstance(out, torch.Tensor) or not _bad_grads(feeder):
            continue
        where = _position(cap, out)
        if where is None:
            continue
        name = model.root_name(feeder, frame) or type(feeder).__name__
        into = model.root_name(root, frame) or type(root).__name__
        # (out of torch.compile's wrapper: run, it would compile the replay's own code, and warn so)
        first = _replayed(model, root, unwrapped(feeder), record, cap, where, name, grad_out, result, notes, backward)
        if first is None:
            continue
        var = variable_holding(out, model.caller.frame or frame) or "its input"
        first["through"] = {"model": name, "into": into, "as": var}
        notes.append(f"the backward was replayed on into {name}'s, which holds the non-finite gradients: "
                     f"{into}'s input {var} is {name}'s output")
        return first
    return None


def _replayed(model: Any, root: torch.nn.Module, feeder: torch.nn.Module, record: dict[str, Any],
              cap: dict[str, Any], where: tuple[str, Any], name: str, grad_out: torch.Tensor,
              result: dict[str, Any], notes: list[str], backward: Backward) -> dict[str, Any] | None:
    names = {id(t): f"{name}.{n}" for n, t in itertools.chain(feeder.named_parameters(), feeder.named_buffers())}
    modules = ModuleStack(feeder, name)
    prov = Provenance(modules, names)
    modes = [(m, m.training) for m in feeder.modules()]
    with preserved_state(model), warning_filters.recorded():
        try:
            with torch.enable_grad(), torch.autograd.detect_anomaly(check_nan=False):
                if record.get("rng"):
                    set_rng_state(record["rng"])
                with modules, prov:
                    fed = output_at(run_root(feeder, record), None)
                if not isinstance(fed, torch.Tensor) or fed.grad_fn is None or not finite(fed):
                    return None  # (its forward makes a NaN, or nothing to differentiate: not this case)
                leaf = fed.detach().requires_grad_()
                restore_step_start(cap)
                out = output_at(run_root(root, _with_input(cap, where, leaf)), cap.get("grad_output_at"))
                if not isinstance(out, torch.Tensor) or out.grad_fn is None or out.shape != grad_out.shape:
                    return None
                (reached,) = torch.autograd.grad(out, leaf, grad_out, allow_unused=True)
                if reached is None or not finite(reached):
                    return None  # (the captured model's own backward: the replay before this one ran it)
                params = [p for p in feeder.parameters() if p.requires_grad]
                first = backward(fed, reached, params, prov, result)
                if first is None and "error" not in result:  # (verdict: not "its backward was not replayed")
                    result["fed_backward_finite"] = name
                return first
        except Exception as e:  # (a forward that cannot run again here, whatever it raises: nothing is blamed)
            notes.append(f"{name}'s backward was not replayed: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}")
            return None
        finally:
            for m, training in modes:
                m.training = training


def _bad_grads(module: torch.nn.Module) -> bool:
    """Some parameter's gradient (the real one, as the step left it) is not finite."""
    return any(p.grad is not None and p.grad.is_floating_point() and not bool(torch.isfinite(p.grad).all())
               for p in module.parameters())


def _position(cap: dict[str, Any], out: torch.Tensor) -> tuple[str, Any] | None:
    """Where the captured forward took `out` itself: ("args", index) or ("kwargs", name)."""
    for i, a in enumerate(cap.get("args") or ()):
        if a is out:
            return "args", i
    for k, v in (cap.get("kwargs") or {}).items():
        if v is out:
            return "kwargs", k
    return None


def _with_input(cap: dict[str, Any], where: tuple[str, Any], value: torch.Tensor) -> dict[str, Any]:
    """The capture with `value` in the place `where` names (a copy: the capture is unchanged)."""
    kind, key = where
    if kind == "args":
        args = list(cap["args"])
        args[key] = value
        return {**cap, "args": tuple(args)}
    return {**cap, "kwargs": {**(cap.get("kwargs") or {}), key: value}}
