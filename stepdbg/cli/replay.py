"""`stepdbg replay BUNDLE`: replay a step saved by `--on-break save` (or `save` at a pause),
in a fresh process, on this machine. The bundle is checked here; the replay itself runs
in ``python -m stepdbg.agent.replay.offline``, which imports torch and the model's code."""

from __future__ import annotations

import os
import subprocess

from stepdbg.wire.fold import say
from stepdbg.wire.model_spec import spec_error

from . import isolated
from .common import Parser

DESCRIPTION = """\
Replay a saved step (an evidence bundle, stepdbg-stepN/, written by --on-break save) in a
fresh process: the model is rebuilt from its code, given the step's starting state and
inputs, and the step runs again under anomaly detection. It prints what the live replay
printed: the op, module and line that made the first non-finite value, and whether the
fault came back from the same state."""

EPILOG = """\
The model's code is yours, never the bundle's (a bundle is data: nothing it names or
ships runs). By default the model's class, recorded in the bundle, is looked up in the
training script it records, read as definitions only (its imports, classes, functions
and constants; none of its top-level statements, so the training never runs again) and
built with no arguments if it is an nn.Module. The file is named on stderr before it is
read. A model built with arguments needs --model, a function you name.

examples:
  stepdbg replay stepdbg-step30
  stepdbg replay --json stepdbg-step30-rank1 > replay.json
  stepdbg replay --model train.py:build_model --device cuda stepdbg-step30"""


def main(argv: list[str]) -> int:
    p = Parser(prog="stepdbg replay", usage="%(prog)s [--json] [--device cpu|cuda] [--model SPEC] BUNDLE",
               description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("bundle", metavar="BUNDLE", help="the bundle's directory (stepdbg-stepN[-rankR])")
    p.add_argument("--json", action="store_true", help="print the replay op's object as JSON, alone on stdout")
    p.add_argument("--device", choices=("cpu", "cuda"),
                   help="where to replay (default: where the step ran, when this machine has it)")
    p.add_argument("--model", metavar="MODULE:FACTORY",
                   help="a function (or class) that builds the model with no arguments: pkg.models:build or "
                        "train.py:build_model")
    ns = p.parse_args(argv)
    if not os.path.isdir(ns.bundle) or not os.path.lexists(os.path.join(ns.bundle, "meta.json")):
        say(f"stepdbg replay: {ns.bundle!r} is not an evidence bundle (a directory with meta.json and "
            "tensors.pt, written by --on-break save)")
        return 1
    why = spec_error(ns.model, ns.bundle) if ns.model else None
    if why:  # (here, before the replay's process spends seconds importing torch)
        say(f"stepdbg replay: {why}")
        return 1
    # Not `python -m`, which puts the current directory first on sys.path: replayed from inside
    # a bundle, a torch.py or json.py shipped in it would be imported before any check ran.
    cmd = isolated.command("stepdbg.agent.replay.offline", ns.bundle, *(["--json"] if ns.json else []),
                           *(["--device", ns.device] if ns.device else []), *(["--model", ns.model] if ns.model else []))
    return subprocess.call(cmd)
