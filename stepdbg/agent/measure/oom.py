"""Why the memory ran out: rules over what was measured at the out-of-memory error.

The first rule that holds is the cause, with the numbers in its words:

- ``batch_jump``: this step's batch is far larger than the steps' before (both shapes, and
  the line the batch came from);
- ``leak``: the memory at the end of each step grew step after step (the variable that
  holds the most, from the census);
- ``activations``: tensors saved for the backward hold most of it (the module that saved
  most, when recorded: checkpoint it);
- ``optimizer_state``: the optimizer's state holds most of it (options that cut it);
- ``fragmentation``: the CUDA allocator reserves far more than tensors use
  (``expandable_segments``);
- otherwise ``size``: the step needs more than the device has.
"""

from __future__ import annotations

import ast
import functools
import math
import os
from types import FrameType
from typing import Any

from stepdbg.agent.measure import source_lines
from stepdbg.agent.measure.census import top_holder
from stepdbg.agent.measure.memory import asked_bytes
from stepdbg.wire.conditions import format_size

LEAK_STEPS = 5  # step-end memory samples the leak rule needs
JUMP = 4.0  # a batch this many times the usual number of elements is a jump


def size(n: float | None) -> str:
    return "?" if n is None else format_size(n)


def explain(exc: BaseException, census: dict[str, Any], history: list[dict[str, Any]],
            batch: dict[str, Any] | None, cuda: list[dict[str, Any]]) -> dict[str, Any]:
    """``details.oom`` of an out-of-memory break: bytes asked, the census, and the cause."""
    asked = asked_bytes(exc)
    cause = (_batch_jump(history, batch) or _leak(history, census) or _dominant(census)
             or _fragmentation(cuda, asked) or _size(census, asked))
    return {"asked": asked, "by_category": census["by_category"], "largest": census["largest"][:8],
            "holders": census["holders"], "cause": cause}


def _numel(shape: list[int] | None) -> int:
    return math.prod(shape) if shape else 0


def _batch_jump(history: list[dict[str, Any]], batch: dict[str, Any] | None) -> dict[str, str] | None:
    shapes = [h.get("batch_shape") for h in history if h.get("batch_shape")]
    if batch is None or not batch.get("shape") or not shapes:
        return None
    usual = max(shapes, key=shapes.count)
    now = batch["shape"]
    ratio = _numel(now) / max(1, _numel(usual))
    if ratio < JUMP:
        return None
    where = batch.get("origin")
    line = (f", from {where['name']} at {where['file']}:{where['line']} ({where['code']})"
            if where else "")
    return {"rule": "batch_jump",
            "text": f"this step's batch is {now} where the steps before had {usual}: {ratio:,.0f}x the "
                    f"elements{line}. Check what built this batch (a length, a collate, a filter that let "
                    f"everything through)."}


def _leak(history: list[dict[str, Any]], census: dict[str, Any]) -> dict[str, str] | None:
    # The last samples (host RSS is not read at every step: HOST_MEMORY_PERIOD).
    samples = [(h.get("step"), h["mem"]) for h in history if h.get("mem")][-LEAK_STEPS * 2:]
    if len(samples) < LEAK_STEPS:
        return None
    mem = [m for _, m in samples]
    rises = sum(b > a for a, b in zip(mem, mem[1:], strict=False))
    if rises < 0.75 * (len(mem) - 1) or mem[-1] < 1.2 * mem[0]:
        return None
    held = top_holder(census)
    return {"rule": "leak",
            "text": f"memory at the end of a step grew from {size(mem[0])} (step {samples[0][0]}) to "
                    f"{size(mem[-1])} (step {samples[-1][0]}) in {len(mem)} samples{held}: something keeps "
                    f"tensors alive across steps (keep loss.item(), not loss; detach what you store)"}


def _dominant(census: dict[str, Any]) -> dict[str, str] | None:
    cats, counted = census["by_category"], census["counted"] or 1
    if cats["activations"] >= 0.5 * counted:
        # A module that saved them (recorded with --record-memory), never a variable: a
        # variable's tensors are not what checkpointing cuts.
        top = next((h for h in census["holders"] if h.get("category") == "activations" and h["name"]
                    and not h["name"].endswith("graph)")), None)
        who = (f"; {top['name']} saved the most ({size(top['bytes'])}): checkpoint it with "
               f"torch.utils.checkpoint" if top else
               "; run with --record-memory to see which module saves most, and checkpoint it")
        return {"rule": "activations",
                "text": f"tensors saved for the backward hold {size(cats['activations'])} of "
                        f"{size(counted)}{who}, or use a smaller batch or mixed precision"}
    if cats["optimizer_state"] >= 0.4 * counted and cats["optimizer_state"] >= cats["parameters"]:
        return {"rule": "optimizer_state",
                "text": f"the optimizer's state holds {size(cats['optimizer_state'])} of {size(counted)}: "
                        f"a leaner optimizer (SGD with momentum, Adafactor, 8-bit Adam), or the state "
                        f"sharded across ranks (ZeroRedundancyOptimizer, FSDP)"}
    return None


def _fragmentation(cuda: list[dict[str, Any]], asked: int | None) -> dict[str, str] | None:
    for d in cuda:
        spare = d["reserved"] - d["allocated"]
        if spare > max(0.25 * d["reserved"], asked or 0):
            return {"rule": "fragmentation",
                    "text": f"cuda:{d['device']} reserves {size(d['reserved'])} but tensors use "
                            f"{size(d['allocated'])}: {size(spare)} is cached in pieces too small for "
                            f"{size(asked)}; set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"}
    return None


def _size(census: dict[str, Any], asked: int | None) -> dict[str, str]:
    return {"rule": "size",
            "text": f"no batch jump, leak or dominant category: the step needs more than the device has "
                    f"({size(census['counted'])} in tensors, {size(asked)} more asked); a smaller batch "
                    f"with gradient accumulation, mixed precision or activation checkpointing"}


def batch_origin(frames: list[FrameType], batch: Any) -> dict[str, Any] | None:
    """The variable of the paused frames that holds `batch`, and the line that assigned it."""
    for f in frames:  # outermost first: the training loop's frame
        for name, value in list(f.f_locals.items()):
            if value is batch or (isinstance(value, (list, tuple)) and any(v is batch for v in value[:8])):
                line = assigned_at(f, name) or f.f_lineno
                path = os.path.relpath(f.f_code.co_filename)
                return {"name": name, "file": f.f_code.co_filename if path.startswith("..") else path, "line": line,
                        "code": source_lines.line(f.f_code.co_filename, line, f.f_globals).strip()}
    return None


def assigned_at(frame: FrameType, name: str) -> int | None:
    """The line of the frame's function that last assigned `name` before the current line
    (`x = get_batch()`, `for x, y in loader:`), or its last assignment anywhere after it."""
    lines = _assignments(frame.f_code.co_filename, frame.f_code.co_firstlineno, name)
    before = [n for n in lines if n <= frame.f_lineno]
    return (before or lines or [None])[-1]


@functools.lru_cache(maxsize=64)
def _assignments(path: str, first: int, name: str) -> list[int]:
    try:
        tree = ast.parse("".join(source_lines.lines(path)))
    except (SyntaxError, ValueError):
        return []
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                node.lineno == first or (node.decorator_list and node.decorator_list[0].lineno == first)):
            scope = node
            break
    found = []
    for node in ast.walk(scope):
        targets = ([node.target] if isinstance(node, (ast.For, ast.AugAssign, ast.AnnAssign))
                   else node.targets if isinstance(node, ast.Assign) else [])
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            found.append(node.lineno)
    return sorted(found)
