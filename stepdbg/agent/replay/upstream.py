"""A non-finite input that another model made: a GAN's discriminator is fed the generator's
output (`netD(fake.detach())`), so a NaN born in the generator's forward reaches the
discriminator as its input, and "the data" would be untrue. Where the bad input is (a view
of, or computed from) the output of another model's last forward, kept by the step model
(step/upstream.py), that forward runs again from its own inputs and RNG state, under the
same provenance rules, and its producer is the answer: the op, module and line in the
generator (or its own input, the data it was fed, at the line that called it).

A bad input that the program computed between the models (it has a grad_fn: a log of the
generator's output, a normalization of a backbone's features) is not the data either: the
op of its graph that made the value is named (born_in_program).
"""

from __future__ import annotations

import itertools
import re
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.measure import warning_filters
from stepdbg.agent.measure.tensors import set_rng_state
from stepdbg.agent.replay.advice import GUARDS
from stepdbg.agent.replay.autograd_graph import guess_line, search_input_graph
from stepdbg.agent.replay.provenance import ModuleStack, Provenance, named_tensors
from stepdbg.agent.replay.rerun import preserved_state, run_root, shown_origin, unwrapped
from stepdbg.agent.step.upstream import alive, record_feeds

DEPTH = 3  # models fed by models, followed at most (an encoder feeding a decoder feeding a critic)


def born_upstream(model: Any, cap: dict[str, Any], first: dict[str, Any] | None, frame: FrameType | None,
                  input_born: Any, depth: int = 0) -> dict[str, Any] | None:
    """`first`, the input-born origin of the captured forward, or, when its bad input came
    out of another model's forward, where that forward's value is born (`fed`: which
    model's input it reached, as what). `input_born(cap, args, kwargs, frame)`: replay.py's
    check of a forward's inputs."""
    if first is None or first.get("where") != "input" or depth >= DEPTH:
        return first
    held = _held(cap, first)
    fed_root = cap.get("root")
    fed = alive(fed_root)
    into = (model.root_name(unwrapped(fed), frame) or type(unwrapped(fed)).__name__) if fed is not None else None
    written = None  # the model whose output's memory the input holds, though its forward makes it finite
    for record in list((cap.get("upstream") or {}).values()):
        root = alive(record.get("root"))
        kind = record_feeds(record, held) if isinstance(held, torch.Tensor) and root is not None else None
        if kind is None:
            continue
        root = unwrapped(root)
        name = model.root_name(root, frame) or type(root).__name__
        origin = input_born(record, record.get("args"), record.get("kwargs") or {}, None)
        if origin is not None:
            origin = born_upstream(model, record, origin, frame, input_born, depth + 1)
        else:
            origin = _forward_producer(model, root, record, name)
        if origin is None:  # (that model's forward, replayed, stays finite: another model's may not, else the input)
            if kind == "storage" or held.grad_fn is None and _same_memory(held, record):
                written = written or name
            continue
        origin["fed"] = {"model": name, "into": into, "as": first.get("tensor")}
        return origin
    return _written_after(first, written, into, frame) if written else first


def _same_memory(held: torch.Tensor, record: dict[str, Any]) -> bool:
    out = alive(record.get("output"))
    try:
        return isinstance(out, torch.Tensor) and held.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()
    except RuntimeError:
        return False


def _written_after(first: dict[str, Any], model_name: str, into: str | None, frame: FrameType | None) -> dict[str, Any]:
    """The input holds `model_name`'s output's memory, whose forward, replayed, makes it
    finite: the program wrote its values after that model made them (an in-place op on it:
    `fake.log_()`), named at the paused function's only line writing the variable in place."""
    var = str(first.get("tensor") or "")
    where: dict[str, Any] = {}
    if var.isidentifier():
        v = re.escape(var)
        domain = "|".join(GUARDS)  # (a log_ or sqrt_ of it first: the write most likely to make a NaN)
        for writes in (rf"\b{v}\b(?:\.\w+\([^)]*\))*\.(?:{domain})_\(",
                       rf"\b{v}\s*\[[^\]]*\]\s*=(?!=)|\b{v}\b(?:\.\w+\([^)]*\))*\.\w+_\(|\b{v}\s*[-+*/]="):
            where = guess_line(set(), frame, pattern=re.compile(writes), unique=True)
            if where.get("line"):
                break
    ops = re.findall(r"\.(\w+)_\(", where.get("code") or "") if where.get("line") else []
    op = next((o for o in ops if o in GUARDS), ops[-1] + "_" if ops else "an in-place write")
    return {"where": "program", "module": None, "module_type": None, "op": op, "written_after": model_name,
            "tensor": var, "count": first.get("count"), "into": into, **where}


def born_in_program(model: Any, cap: dict[str, Any], first: dict[str, Any] | None,
                    frame: FrameType | None) -> dict[str, Any] | None:
    """`first`, or, when its bad input is no model's output but was computed by the program
    from one (or from parameters), the op that made it, named as the program's (where:
    "program"), with the input it reached (`tensor`, `into`)."""
    if first is None or first.get("where") != "input" or first.get("fed"):
        return first
    held = _held(cap, first)
    made = search_input_graph(held, frame) if isinstance(held, torch.Tensor) else None
    if made is None:  # (computed in the step, by ops that kept nothing that tells: the data's, or theirs)
        return {**first, "computed": True} if isinstance(held, torch.Tensor) and held.grad_fn is not None else first
    ref = cap.get("root")
    root = alive(ref)
    into = (model.root_name(unwrapped(root), frame) or type(unwrapped(root)).__name__) if root is not None else None
    return {**made, "tensor": first.get("tensor"), "count": first.get("count"), "into": into}


def _held(cap: dict[str, Any], first: dict[str, Any]) -> Any:
    """The captured input that `first` (an input-born origin) names."""
    named = dict(itertools.chain(named_tensors(cap.get("batch"), "batch"), named_tensors(cap.get("args"), "args"),
                                 named_tensors(cap.get("kwargs") or {}, "kwargs")))
    return named.get(first.get("as") or first.get("tensor"))


def fed_words(first: dict[str, Any] | None) -> str:
    """' (netD's input fake is netG's output)', for a summary; '' when not fed by a model."""
    fed = (first or {}).get("fed")
    if not fed:
        return ""
    return f"; {fed['into'] or 'the model'}'s input {fed['as']} is {fed['model']}'s output, not the data"


def _forward_producer(model: Any, root: torch.nn.Module, record: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The producer of the first non-finite value in `root`'s kept forward, replayed from
    its inputs and RNG state, on copies of its buffers (rerun.run_root); the program's RNG
    and modes are as they were afterwards."""
    names = {id(t): f"{name}.{n}" for n, t in itertools.chain(root.named_parameters(), root.named_buffers())}
    modules = ModuleStack(root, name)
    prov = Provenance(modules, names)
    modes = [(m, m.training) for m in root.modules()]
    with preserved_state(model), warning_filters.recorded():
        try:
            if record.get("rng"):
                set_rng_state(record["rng"])
            with torch.enable_grad(), torch.autograd.detect_anomaly(check_nan=False), modules, prov:
                out = run_root(root, record)
        except Exception:  # (its own forward failed: nothing is blamed upstream)
            return None
        finally:
            for m, training in modes:
                m.training = training
    return shown_origin(prov.producer_of(out))
