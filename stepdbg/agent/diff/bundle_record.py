"""`stepdbg diff BUNDLE_A BUNDLE_B`: one evidence bundle's step, replayed and recorded as
a run under `stepdbg diff` records its step (issue 46).

Run as ``python -m stepdbg.agent.diff.bundle_record BUNDLE RECORD MAX_CALLS [--model SPEC]``
by the command line, one process per bundle (two bundles' model code, loaded in one
process, would share the modules their scripts import). The bundle is data, read and
checked by bundle.read; the model is built from its code as `stepdbg replay` builds it
(offline.py: the recorded script's definitions only, or --model), given the bundle's
parameters and buffers, and its step's forward runs on the captured inputs with torch's
RNG as the step started (twice.run_recorded), then its backward from the gradient
captured at the model's output. The record (stepdbg/wire/step_diff.py's format, as step
0) holds the batch, parameters and buffers, every module call and the gradients; a bundle
holds no loss function nor optimizer, so neither is compared.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from stepdbg.agent.diff.calls import CallLog
from stepdbg.agent.diff.randomness import Others
from stepdbg.agent.diff.twice import MAX_OPS, OpWatch, run_recorded
from stepdbg.agent.replay import bundle
from stepdbg.agent.replay.bundle import BundleError
from stepdbg.agent.replay.offline import BundleModel, captured, rebuilt
from stepdbg.agent.replay.rerun import preserved_state
from stepdbg.wire.step_diff import FORMAT_VERSION


def record(path: Path, out: str, max_calls: int, spec: str | None = None) -> dict[str, Any]:
    """Write the record of the bundle at `path` to `out` (created 0600); its step line."""
    meta, data = bundle.read(path)
    if meta.get("parameters") == "sharded":
        raise BundleError("the bundle holds no parameters (they were sharded across ranks): nothing to run")
    cap, _, dev = captured(meta, data, None)
    model = rebuilt(meta, data, spec, path, dev)
    names = {id(m): n for n, m in model.named_modules()}
    start = CallLog(max_calls, names.get)
    start.step_start(cap["args"], cap["kwargs"], [*model.named_parameters(), *model.named_buffers()])
    with preserved_state(BundleModel(model, cap, [])):  # type: ignore[arg-type]
        entries = run_recorded(model, cap, 0, names, max_calls, OpWatch(Others(model), MAX_OPS))[0]
    step = {"kind": "step", "step": 0, "bundle_step": meta.get("step"), "calls": sum(
        1 for e in entries if e["what"] in ("output", "output[0]")), "capped": 0, "loss": None,
            "parameters": meta.get("parameters")}
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps({"kind": "header", "version": FORMAT_VERSION, "steps": 1, "max_calls": max_calls,
                            "bundle": str(path)}) + "\n")
        for e in [*start.entries, *entries]:
            f.write(json.dumps(e) + "\n")
        f.write(json.dumps(step) + "\n")
        f.write(json.dumps({"kind": "end", "error": None}) + "\n")
    return step


def main(argv: list[str] | None = None) -> int:
    torch.set_grad_enabled(True)
    p = argparse.ArgumentParser(prog="stepdbg diff (bundle)")
    p.add_argument("bundle")
    p.add_argument("record")
    p.add_argument("max_calls", type=int)
    p.add_argument("--model", metavar="MODULE:FACTORY")
    ns = p.parse_args(argv)
    try:
        step = record(Path(ns.bundle), ns.record, ns.max_calls, ns.model)
    except BundleError as e:
        print(f"{ns.bundle}: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # whatever the bundle or the model's code did: one line, never a traceback
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        print(f"{ns.bundle}: its step could not be run again ({type(e).__name__}: {first})", file=sys.stderr)
        return 1
    if step.get("parameters") == "after_update":
        print(f"{ns.bundle}: the bundle holds the parameters after the update (no snapshot of the step's start)",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
