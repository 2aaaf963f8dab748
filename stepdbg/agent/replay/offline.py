"""``stepdbg replay BUNDLE``: replay a saved step (bundle.py) in a fresh process, with no job.

The model is rebuilt from its code, then given the bundle's step-start state. Which code:

- ``--model MODULE:FACTORY`` or ``--model FILE.py:FACTORY``: a function (or a class) that
  builds the model with no arguments (``GPT(GPTConfig(...))`` behind a function);
- else the model's class, recorded in the bundle, built with no arguments: imported by its
  module, or, for a class defined in the training script itself, from the script loaded
  under another name, so that its ``if __name__ == "__main__":`` block (the training)
  does not run. A script that trains at its top level is not loaded.

The replay is the live one (replay.py) on this state and the captured inputs; what it
prints is what the job printed (``--json``: the same object as the ``replay`` op), with
the bundle's own notes: a replay on another device, or on code changed since.
Run as ``python -m stepdbg.agent.replay.offline`` by the CLI (which imports no torch).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from stepdbg.agent.replay import bundle
from stepdbg.agent.replay.bundle import BundleError
from stepdbg.agent.replay.replay import replay_inputs, replay_step, replay_words
from stepdbg.wire.protocol import plain

FACTORY_HINT = "give --model MODULE:FACTORY or --model FILE.py:FACTORY, a function that builds the model"
_TRAINS = (ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith)


class BundleModel:
    """What replay_step reads of a StepModel, from a bundle: the model, the captured step."""

    def __init__(self, root: torch.nn.Module, capture: dict[str, Any], history: list[dict[str, Any]]) -> None:
        self._root, self.capture = root, capture
        self.history = deque(history)
        self.step, self.busy = capture.get("step", 0), False

    def root(self) -> torch.nn.Module:
        return self._root

    def output(self) -> None:
        return None  # not in a bundle (a GPT's logits); whether it was finite is (capture["output_finite"])


@contextlib.contextmanager
def _as_the_job(meta: dict[str, Any]) -> Iterator[None]:
    """sys.argv and sys.path as the job had them while its code is imported (a script that
    parses its arguments at import reads the job's)."""
    argv, path = sys.argv, list(sys.path)
    script = (meta.get("model") or {}).get("script")
    sys.argv = list(meta.get("argv") or ["replay"])
    if script:
        sys.path.insert(0, os.path.dirname(script))
    try:
        yield
    finally:
        sys.argv, sys.path[:] = argv, path


def _load_file(file: str) -> Any:
    """The module of a .py file, loaded under a name that is not __main__; refused when the
    file trains at its top level (a loop, a with block or a call outside any function)."""
    if not os.path.isfile(file):
        raise BundleError(f"{file}: no such file (the model's code is needed to rebuild it; {FACTORY_HINT})")
    tree = ast.parse(Path(file).read_text(), file)
    runs = [n for n in tree.body if isinstance(n, _TRAINS) or (isinstance(n, ast.Expr) and isinstance(n.value, ast.Call))]
    if runs:
        raise BundleError(f"{file} runs code when imported (line {runs[0].lineno}; training belongs under "
                          f"`if __name__ == \"__main__\":`): {FACTORY_HINT}")
    spec = importlib.util.spec_from_file_location("stepdbg_replay_model", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _attr(module: Any, qualname: str, where: str) -> Callable[[], Any]:
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise BundleError(f"{where} has no {qualname}")
    return obj


def build_model(meta: dict[str, Any], spec: str | None) -> torch.nn.Module:
    """The model, from `spec` (MODULE:FACTORY, FILE.py:FACTORY) or the bundle's class."""
    src = meta.get("model") or {}
    with _as_the_job(meta):
        if spec:
            target, _, name = spec.rpartition(":")
            if not target or not name:
                raise BundleError(f"--model {spec!r}: expected MODULE:FACTORY or FILE.py:FACTORY")
            module = _load_file(target) if target.endswith(".py") else importlib.import_module(target)
            factory, what = _attr(module, name, target), spec
        elif str(src.get("module", "")).startswith("torch."):
            raise BundleError(f"the model is torch's {src['qualname']}, built in the script: {FACTORY_HINT}")
        else:
            module = (_load_file(src.get("file") or "") if src.get("module") == "__main__"
                      else importlib.import_module(src.get("module") or ""))
            factory, what = _attr(module, src.get("qualname") or "", src.get("file") or ""), src.get("qualname")
        try:
            model = factory()
        except TypeError as e:
            raise BundleError(f"{what}() needs arguments ({e}): {FACTORY_HINT}") from None
    if not isinstance(model, torch.nn.Module):
        raise BundleError(f"{what}() returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def _load_state(model: torch.nn.Module, params: dict[str, torch.Tensor], buffers: dict[str, Any]) -> None:
    missing, unexpected = set(dict(model.named_parameters())) - set(params), set(params) - set(dict(model.named_parameters()))
    if missing or unexpected:
        raise BundleError(f"the model built here does not match the bundle's: missing {sorted(missing)[:5]}, "
                          f"unexpected {sorted(unexpected)[:5]} ({FACTORY_HINT})")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.shape != params[name].shape:
                raise BundleError(f"{name}: {list(p.shape)} here, {list(params[name].shape)} in the bundle")
            p.copy_(params[name])
        for name, b in model.named_buffers():
            if isinstance(buffers.get(name), torch.Tensor) and buffers[name].shape == b.shape:
                b.copy_(buffers[name])


def _to(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {k: _to(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


def replay_bundle(path: Path, spec: str | None = None, device: str | None = None) -> dict[str, Any]:
    """Replay the bundle at `path`: the replay op's object, with "bundle" notes."""
    meta, data = bundle.read(path)
    brk_record = meta.get("break") or {}
    # The break as the replay reads it (phase, condition(s), scalars): breaks.Break's fields.
    brk = SimpleNamespace(**{"conditions": [], "scalars": {}, "phase": None, "condition": "", **brk_record}) \
        if brk_record else None
    ran_on = torch.device(meta.get("device") or "cpu")
    dev = torch.device(device or (ran_on.type if ran_on.type == "cpu" or torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BundleError("--device cuda: no CUDA device here")
    rng = {"cpu": data["rng"]["cpu"], **({"cuda": data["rng"]["cuda"]} if dev.type == "cuda" and data["rng"]["cuda"] else {})}
    cap = {"step": meta.get("step"), "args": _to(data["args"], dev), "kwargs": _to(data["kwargs"] or {}, dev),
           "batch": _to(data["batch"], dev), "grad_output": _to(data["grad_output"], dev), "rng": rng,
           "buffers": _to(data["buffers"], dev), "sample_indices": data.get("sample_indices"),
           "kernels": bundle.kernels_from_json(meta.get("kernels")), "output_finite": meta.get("output_finite")}
    notes = [f"the inputs held what a bundle does not keep: {', '.join(meta['left_out'][:3])}"] if meta.get("left_out") else []
    if meta.get("parameters") == "sharded":
        result = replay_inputs(cap, brk)
    else:
        model = build_model(meta, spec)
        _load_state(model, data["parameters"], data["buffers"])
        model.to(dev)
        result = replay_step(BundleModel(model, cap, meta.get("history") or []), brk, None)
        if meta.get("parameters") == "after_update":
            notes.append("the bundle holds the parameters after the update (no snapshot of the step's start)")
    if dev.type != ran_on.type:
        result["exact"] = False
        result["not_exact"] = f"the step ran on {ran_on.type}, replayed on {dev.type}: other kernels"
    code = (meta.get("model") or {}).get("file")
    if code and os.path.isfile(code) and meta["model"].get("code_sha256") != hashlib.sha256(Path(code).read_bytes()).hexdigest():
        notes.append(f"{code} changed since the bundle was saved")
    result["bundle"] = {"path": str(path), "rank": meta.get("rank"), "versions": meta.get("versions"), "notes": notes}
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stepdbg replay")
    p.add_argument("bundle")
    p.add_argument("--json", action="store_true")
    p.add_argument("--device", choices=("cpu", "cuda"))
    p.add_argument("--model", metavar="MODULE:FACTORY")
    ns = p.parse_args(argv)
    try:
        result = replay_bundle(Path(ns.bundle), ns.model, ns.device)
    except (BundleError, ImportError, SyntaxError, OSError) as e:
        print(f"stepdbg replay: {e}", file=sys.stderr)
        return 1
    try:
        _print(result, ns.json)
    except BrokenPipeError:  # `stepdbg replay --json B | head`: the reader left; end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(plain(result)), flush=True)
    else:
        info = result["bundle"]
        print(f"bundle {info['path']} (saved by stepdbg {info['versions']['stepdbg']}, torch {info['versions']['torch']})")
        print(replay_words(result))
        for note in [*info["notes"], *([result["not_exact"]] if result.get("not_exact") else [])]:
            print(f"  note: {note}")
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
