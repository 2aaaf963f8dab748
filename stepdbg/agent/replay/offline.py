"""``stepdbg replay BUNDLE``: replay a saved step (bundle.py) in a fresh process, with no job.

The model is rebuilt from its code, then given the bundle's step-start state. Which code:

- ``--model MODULE:FACTORY`` or ``--model FILE.py:FACTORY``: a function (or a class) that
  builds the model with no arguments (``GPT(GPTConfig(...))`` behind a function);
- else the model's class, recorded in the bundle, found in the definitions of the recorded
  training script and built with no arguments.

Never from the bundle: it is data, checked field by field (bundle_check.py), and a file is
loaded as definitions only, whose training never runs (model_code.py).

The replay is the live one (replay.py) on this state and the captured inputs; what it
prints is what the job printed (``--json``: the same object as the ``replay`` op), with
the bundle's own notes: a replay on another device, or on code changed since.
Run as ``python -m stepdbg.agent.replay.offline`` by the CLI (which imports no torch).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from stepdbg.agent.measure.frames import ModelCaller
from stepdbg.agent.replay import bundle, bundle_check, model_code, module_tree
from stepdbg.agent.replay.bundle import BundleError
from stepdbg.agent.replay.model_code import FACTORY_HINT, SOURCE_CAP
from stepdbg.agent.replay.replay import replay_inputs, replay_step, replay_words
from stepdbg.wire.fold import for_terminal
from stepdbg.wire.protocol import plain


class BundleModel:
    """What replay_step reads of a StepModel, from a bundle: the model, the captured step."""

    def __init__(self, root: torch.nn.Module, capture: dict[str, Any], history: list[dict[str, Any]],
                 name: str = "") -> None:
        self._root, self.capture, self._name = root, capture, name
        self.history = deque(history)
        self.step, self.busy = capture.get("step", 0), False
        self.caller = ModelCaller()  # (no frame: the job's code does not run here)
        # The job stepped an optimizer where its steps had a learning rate (the advice's `lr X pin`)
        self.optimizers = [None] if any(r.get("lr") for r in history) else []

    def root(self) -> torch.nn.Module:
        return self._root

    def root_name(self, root: torch.nn.Module, frame: Any = None) -> str:
        return self._name  # (the job's name for it, where the program has two: a GAN's netD; else '')

    def output(self) -> None:
        return None  # not in a bundle (a GPT's logits); whether it was finite is (capture["output_finite"])


@contextlib.contextmanager
def _as_the_job(meta: dict[str, Any]) -> Iterator[None]:
    """sys.argv as the job had it while the model's code loads and builds (a class that reads
    its arguments reads the job's); sys.path as it was after."""
    argv, path = sys.argv, list(sys.path)
    sys.argv = list(meta.get("argv") or ["replay"])
    try:
        yield
    finally:
        sys.argv, sys.path[:] = argv, path


def build_model(meta: dict[str, Any], spec: str | None, bundle_dir: Path) -> torch.nn.Module:
    """The model, from `spec` (the user's MODULE:FACTORY or FILE.py:FACTORY) or the class
    the bundle records, found in the user's own script (model_code.py)."""
    with _as_the_job(meta), contextlib.redirect_stdout(sys.stderr):  # what it prints never mixes with --json
        model_code.keep_out(bundle_dir)
        factory, what = (model_code.from_spec(spec, bundle_dir) if spec
                         else model_code.recorded_class(meta.get("model") or {}, bundle_dir))
        try:
            model = factory()
        except TypeError as e:
            raise BundleError(f"{what}() needs arguments ({e}): {FACTORY_HINT}") from None
        except (Exception, SystemExit) as e:  # argparse in a constructor exits: one line, never the replay's end
            raise BundleError(f"{what}() failed: {type(e).__name__}: {e}") from None
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


def captured(meta: dict[str, Any], data: dict[str, Any], device: str | None
             ) -> tuple[dict[str, Any], torch.device, torch.device]:
    """The bundle's step as a live capture reads it (args, kwargs, RNG, buffers, ...) on the
    device it replays on; (capture, the device it ran on, the device here)."""
    ran_on = torch.device(meta.get("device") or "cpu")
    here = ran_on.type == "cuda" and torch.cuda.is_available()
    dev = torch.device(device or (ran_on.type if here else "cpu"))
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BundleError("--device cuda: no CUDA device here")
    rng = {"cpu": data["rng"]["cpu"], **({"cuda": data["rng"]["cuda"]} if dev.type == "cuda" and data["rng"]["cuda"] else {})}
    cap = {"step": meta.get("step"), "args": _to(data["args"], dev), "kwargs": _to(data["kwargs"] or {}, dev),
           "batch": _to(data["batch"], dev), "grad_output": _to(data["grad_output"], dev),
           "grad_output_at": data.get("grad_output_at"), "outputs_direct": data.get("outputs_direct"), "rng": rng,
           "buffers": _to(data["buffers"], dev), "sample_indices": data.get("sample_indices"),
           "kernels": bundle.kernels_from_json(meta.get("kernels")), "output_finite": meta.get("output_finite"),
           "called_from": meta.get("called_from")}
    return cap, ran_on, dev


def rebuilt(meta: dict[str, Any], data: dict[str, Any], spec: str | None, path: Path,
            dev: torch.device) -> torch.nn.Module:
    """The model built from its code (build_model) with the bundle's parameters and buffers."""
    tree, rec = meta.get("modules"), meta.get("model") or {}
    if spec is None and tree is not None and module_tree.torch_class(str(rec.get("module")), str(rec.get("qualname"))):
        # torch's own modules, built in the script (nn.Sequential(...)): no class of the user's to build
        model = module_tree.build(tree, data["parameters"], data["buffers"], FACTORY_HINT)
        _load_state(model, data["parameters"], data["buffers"])
        print(for_terminal(f"stepdbg replay: the model: torch's {rec['qualname']} holding {len(tree['modules']) - 1} "
                           "modules, rebuilt from the bundle's record of them (torch.nn's classes; no code of the "
                           "bundle's runs)", sys.stderr), file=sys.stderr, flush=True)
    else:
        model = build_model(meta, spec, path)
        module_tree.restore(model, tree)  # its flags as at the break (a flag the loop set), not the constructor's
        _load_state(model, data["parameters"], data["buffers"])
    return model.to(dev)


def replay_bundle(path: Path, spec: str | None = None, device: str | None = None) -> dict[str, Any]:
    """Replay the bundle at `path`: the replay op's object, with "bundle" notes."""
    meta, data = bundle.read(path)
    brk_record = meta.get("break") or {}
    # The break as the replay reads it (phase, condition(s), scalars): breaks.Break's fields.
    brk = SimpleNamespace(**{"conditions": [], "scalars": {}, "phase": None, "condition": "", **brk_record}) \
        if brk_record else None
    if brk is not None and meta.get("world"):  # (a rank of a job: its gradients were all-reduced)
        brk.details = {**(brk_record.get("details") or {}), "world": meta["world"], "born_on_rank": meta.get("born_on_rank")}
    cap, ran_on, dev = captured(meta, data, device)
    notes = [f"the inputs held what a bundle does not keep: {', '.join(meta['left_out'][:3])}"] if meta.get("left_out") else []
    if meta.get("parameters") == "sharded":
        result = replay_inputs(cap, brk)
    else:
        model = rebuilt(meta, data, spec, path, dev)
        result = replay_step(BundleModel(model, cap, meta.get("history") or [], meta["model"].get("name") or ""), brk, None)
        if meta.get("parameters") == "after_update":
            notes.append("the bundle holds the parameters after the update (no snapshot of the step's start)")
    if dev.type != ran_on.type:
        result["exact"] = False
        result["not_exact"] = f"the step ran on {ran_on.type}, replayed on {dev.type}: other kernels"
    code = (meta.get("model") or {}).get("file")
    now = _sha256(code) if code else None
    if now is not None and meta["model"].get("code_sha256") != now:
        notes.append(f"{code} changed since the bundle was saved")
    result["bundle"] = {"path": str(path), "rank": meta.get("rank"), "versions": meta.get("versions"), "notes": notes}
    return result


def _sha256(code: str) -> str | None:
    """The SHA-256 of the model's source file, read up to the cap of a script; None when it
    is not a regular file of at most that size (the bundle names it: any file at all)."""
    try:
        return hashlib.sha256(bundle_check.read_capped(Path(code), SOURCE_CAP)).hexdigest()
    except BundleError:
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stepdbg replay")
    p.add_argument("bundle")
    p.add_argument("--json", action="store_true")
    p.add_argument("--device", choices=("cpu", "cuda"))
    p.add_argument("--model", metavar="MODULE:FACTORY")
    ns = p.parse_args(argv)
    try:
        result = replay_bundle(Path(ns.bundle), ns.model, ns.device)
    except BundleError as e:
        print(for_terminal(f"stepdbg replay: {bundle_check.shown(str(e))}", sys.stderr), file=sys.stderr)
        return 1
    except Exception as e:  # whatever else a bundle or the model's code did: one line, never a traceback
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        print(for_terminal(bundle_check.shown(f"stepdbg replay: {ns.bundle}: the replay failed "
                                              f"({type(e).__name__}: {first})"), sys.stderr), file=sys.stderr)
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
        lines = [f"bundle {info['path']} (saved by stepdbg {info['versions']['stepdbg']}, "
                 f"torch {info['versions']['torch']})", *replay_words(result).splitlines(),
                 *(f"  note: {n}" for n in [*info["notes"], *([result["not_exact"]] if result.get("not_exact") else [])])]
        for line in lines:  # whatever the bundle held (a name, an index, torch's words of it) shown, never obeyed
            print(for_terminal(bundle_check.shown(line), sys.stdout))  # (at a terminal, folded between words)
        sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
