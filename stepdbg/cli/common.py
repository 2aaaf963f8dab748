"""What the subcommands share: the parser that fails in one line, the run options
(--break, --on-break, ...), the job's configuration and finding the script to run."""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ..wire import address, files
from ..wire.agent_config import DEFAULT_BREAKS, AgentConfig
from ..wire.conditions import ACTIONS, ConditionError, parse
from ..wire.fold import say
from ..wire.numbers import ascii_int
from . import help_text

EXIT_USAGE = 2
EXIT_FAILED = 1


class UsageError(Exception):
    """Bad stepdbg arguments: printed as one line, exit code 2."""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written, laid out at the terminal's width (help_text.fill):
    written 88 wide, at 80 columns each line broke a word in two."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return help_text.fill(text, width, indent)


class Parser(argparse.ArgumentParser):
    """argparse, with errors raised as one-line UsageErrors in stepdbg's own words. No
    abbreviations: argparse matches them in the script's own arguments too, so a script's
    `--b` failed as "ambiguous option: --b could match --break, --bundle-dir"."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument ") and message.endswith("expected one argument"):
            option = message.split(":")[0].removeprefix("argument ").split("/")[-1]
            raise UsageError(f"{option} needs a value")
        if message.startswith("unrecognized arguments: "):
            first = message.removeprefix("unrecognized arguments: ").split()[0]
            raise UsageError(f"unknown option {first!r} (stepdbg options come before the script; see --help)")
        if message.startswith("the following arguments are required: "):
            missing = message.removeprefix("the following arguments are required: ")
            if "SCRIPT" not in missing:  # (replay's BUNDLE, attach's TARGET; diff's A and B, one example each)
                example = " ".join(w for w in missing.replace(",", " ").split())
                raise UsageError(f"{missing.replace(', ', ' and ')} {'are' if ',' in missing else 'is'} needed; "
                                 f"e.g. {self.prog} {example} (see {self.prog} --help)")
            raise UsageError(f"no script to run; e.g. '{self.prog} python train.py' (see {self.prog} --help)")
        raise UsageError(message)


def at_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


# ---------------------------------------------------------------------- run options


def _condition(spec: str) -> str:
    try:
        parse(spec)  # the spec and what is wrong with it, before anything runs
    except ConditionError as e:
        raise UsageError(str(e)) from None
    return spec


def _action(name: str) -> str:
    if name not in ACTIONS:
        raise UsageError(f"unknown --on-break action {name!r}; known: {', '.join(ACTIONS)}")
    return name


def _directory(value: str) -> str:
    if not os.path.isdir(value):
        raise UsageError(f"--bundle-dir {value!r}: not a directory")
    return os.path.abspath(value)


def _listen(value: str) -> str:
    if address.is_socket_path(value):
        raise UsageError(f"--listen {value!r}: expected HOST:PORT or :PORT, e.g. 127.0.0.1:5678")
    try:
        addr = address.parse(value)
    except ValueError as e:
        raise UsageError(f"--listen {e}") from None
    return f"[{addr.host}]:{addr.port}" if ":" in addr.host else f"{addr.host}:{addr.port}"


def _seconds(value: str) -> float:
    try:
        s = float(value)
    except ValueError:
        s = math.nan
    if not 0 < s < math.inf:
        raise UsageError(f"--detach-timeout {value!r}: expected a number of seconds above 0, e.g. 600")
    return s


def check_report_path(path: str) -> None:
    """A report is a regular file stepdbg can write: a folder, a FIFO (which would hang the
    start until someone reads it) or a device is refused before the script starts."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise UsageError(f"--report {path!r}: folder {d!r} does not exist")
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise UsageError(f"--report {path!r}: {e.strerror}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise UsageError(f"--report {path!r} is a folder; name a file in it, e.g. {os.path.join(path, 'report.jsonl')!r}")
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"--report {path!r} is not a regular file (a FIFO, socket or device); name a file")
    if not os.access(path if mode is not None else d, os.W_OK):
        raise UsageError(f"--report {path!r}: permission denied")


def _count(flag: str, least: int = 0) -> Callable[[str], int]:
    def parse_count(value: str) -> int:
        n = ascii_int(value)
        if n is None or n < least:
            raise UsageError(f"{flag} needs a whole number >= {least}, not {value!r}")
        return n

    return parse_count


def _scale(value: str) -> float:
    try:
        f = float(value)
    except ValueError:
        f = -1.0
    if not 0 < f <= 1e6:
        raise UsageError(f"--rewind-lr-scale needs a number > 0 (e.g. 0.5), not {value!r}")
    return f


def steps(value: str) -> int:
    n = ascii_int(value)
    if n is None or n < 1:
        raise UsageError(f"--steps needs a whole number of steps >= 1, not {value!r}")
    return n


class _ShowConditions(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from ..wire.conditions import HELP

        print(HELP)
        parser.exit()


def add_run_options(p: argparse.ArgumentParser, tui: bool = True) -> None:
    """The options of every command that runs a script (run, serve, doctor, overfit)."""
    from ..version import __version__

    g = p.add_argument_group("options (before the script; everything after it goes to the script)")
    g.add_argument("--break", dest="breaks", metavar="SPEC", action="append", type=_condition, default=[],
                   help="break when SPEC holds (repeatable; default: nan and exception; see --help-conditions)")
    g.add_argument("--on-break", dest="actions", metavar="ACTION", action="append", type=_action, default=[],
                   help="what to do at a break, in order (repeatable): report, replay, save, skip, rewind, abort, pause")
    g.add_argument("--bundle-dir", metavar="DIR", type=_directory,
                   help="where --on-break save writes its evidence bundles (default: the current directory)")
    g.add_argument("--report", metavar="FILE", help="write JSON lines, one event per line, flushed as written")
    g.add_argument("--listen", metavar="HOST:PORT", type=_listen,
                   help="also accept TCP (default host 127.0.0.1; the token is still required)")
    g.add_argument("--detach-timeout", metavar="S", type=_seconds,
                   help="a paused job with no client left resumes by itself after S seconds")
    g.add_argument("--forward-output", action="store_true",
                   help="also send the job's stdout/stderr lines to clients (the job then sees pipes)")
    r = p.add_argument_group("recovery (snapshots in memory; --on-break rewind, or rewind at a pause)")
    r.add_argument("--keep-every", metavar="N", type=_count("--keep-every", 1),
                   help="snapshot the training state (model, optimizers, schedulers, RNG) every N steps")
    r.add_argument("--keep", metavar="K", type=_count("--keep", 1), help="how many snapshots are kept (default 2)")
    r.add_argument("--max-rewinds", metavar="K", type=_count("--max-rewinds"),
                   help="--on-break rewind at most K times; the next break ends the job (exit code 3)")
    r.add_argument("--rewind-lr-scale", metavar="F", type=_scale,
                   help="after a rewind, the LR is F times its value for --rewind-lr-steps steps")
    r.add_argument("--rewind-lr-steps", metavar="M", type=_count("--rewind-lr-steps"), default=None,
                   help="how many steps --rewind-lr-scale lasts (default 100 when F is given)")
    m = p.add_argument_group("memory")
    m.add_argument("--record-memory", action="store_true",
                   help="name the module that saved each activation (a Python call per saved tensor) and, on "
                        "CUDA, record torch's allocation history: a break or an out-of-memory error writes "
                        "memory-STEP.pickle for pytorch.org/memory_viz")
    d = p.add_argument_group("GPU")
    d.add_argument("--skip-on-device", action="store_true",
                   help="with fused optimizers (Adam, AdamW, SGD, Adagrad, fused=True): decide nan and grad_norm>X "
                        "on the device, skip a bad step's update there (found_inf, as GradScaler does) and break "
                        "one step later; no host sync a step. Other optimizers keep the one read a step")
    if tui:
        g.add_argument("--no-tui", action="store_true", help="at a terminal, run headless instead of opening the TUI")
    g.add_argument("-q", "--quiet", action="store_true", help="no stepdbg messages on stderr (the report has all)")
    g.add_argument("--help-conditions", action=_ShowConditions, nargs=0, help="list every condition spec")
    g.add_argument("--version", action="version", version=f"stepdbg {__version__}")
    p.add_argument("-m", dest="as_module", action="store_true", help="run a module as __main__ (python -m MODULE)")
    p.add_argument("script", metavar="[python] SCRIPT.py | -m MODULE", help="the training script (or module) to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


# ---------------------------------------------------------------------- the job's configuration


@dataclass
class Launch:
    """What the CLI starts: the agent's configuration, built here once from the options (the
    job reads it from STEPDBG_CONFIG), and the command that runs the script."""

    agent: AgentConfig
    tui: bool = True
    torchrun: list[str] | None = None  # torchrun's own arguments: every rank gets an agent
    python: str = sys.executable
    module: str | None = None
    script: str | None = None
    args: list[str] = field(default_factory=list)

    def serve_for_tui(self) -> None:
        """The TUI attaches as soon as it can: a break waits for it (and pauses by default)."""
        self.agent.serve = True
        self.agent.announce = False  # (the TUI attaches; leaving the job, its launcher says how to attach again)
        if not self.agent.actions_given:
            self.agent.actions = ["pause"]


def run_config(ns: argparse.Namespace, serve: bool = False) -> Launch:
    """The parsed options and the command after them, checked: the script exists, the
    interpreter is found, torchrun's arguments are split from the script's."""
    agent = AgentConfig(
        breaks=ns.breaks or list(DEFAULT_BREAKS), actions=ns.actions or (["pause"] if serve else ["report"]),
        actions_given=bool(ns.actions), report=ns.report, quiet=ns.quiet, serve=serve, listen=ns.listen,
        detach_timeout=ns.detach_timeout, forward_output=ns.forward_output, rewind=rewind_options(ns),
        record_memory=getattr(ns, "record_memory", False), skip_on_device=getattr(ns, "skip_on_device", False),
        bundle_dir=ns.bundle_dir)
    cfg = Launch(agent, tui=not getattr(ns, "no_tui", True))
    rest = (["-m"] if ns.as_module else []) + [ns.script, *ns.args]
    if is_torchrun(rest[0]):
        script_at = next((k for k, a in enumerate(rest[1:], 1) if a.endswith(".py") or a == "-m"), None)
        if script_at is None:
            raise UsageError("torchrun: no SCRIPT.py (or -m MODULE) found after the torchrun options")
        cfg.python = _interpreter_of(rest[0]) or cfg.python  # a venv's torchrun: that venv's python
        cfg.torchrun = rest[1:script_at]
        rest = rest[script_at:]
    typed = "python"  # (the word typed: `no script after python3` answered `stepdbg python`, the walk's 18)
    if _looks_like_python(rest[0]) and not rest[0].endswith(".py"):
        cfg.python, typed = interpreter(rest[0], quiet=ns.quiet), rest[0]
        rest = rest[1:]
    if rest and rest[0] == "-m":
        if len(rest) < 2:
            raise UsageError("-m needs a module name")
        cfg.module, cfg.args = rest[1], rest[2:]
    elif rest and not rest[0].startswith("-"):
        cfg.script, cfg.args = rest[0], rest[1:]
        if not os.path.isfile(cfg.script):
            raise UsageError(f"script {cfg.script!r} not found")
    else:
        raise UsageError(f"expected a script or -m MODULE, got {' '.join(rest)!r}" if rest else
                         f"no script after {typed}: stepdbg python train.py [ARGS], "
                         "or stepdbg python -m MODULE [ARGS]")
    if agent.report:
        check_report_path(agent.report)
    return cfg


def rewind_options(ns: argparse.Namespace) -> dict[str, Any]:
    """The recovery options, checked together: a rewind needs snapshots to go back to."""
    opts = {"every": getattr(ns, "keep_every", None), "keep": getattr(ns, "keep", None),
            "max_rewinds": getattr(ns, "max_rewinds", None), "lr_scale": getattr(ns, "rewind_lr_scale", None),
            "lr_steps": getattr(ns, "rewind_lr_steps", None)}
    if opts["lr_scale"] is not None and opts["lr_steps"] is None:
        opts["lr_steps"] = 100
    if "rewind" in (getattr(ns, "actions", None) or []) and not opts["every"]:
        raise UsageError("--on-break rewind needs snapshots to go back to: add --keep-every N (e.g. 50)")
    return {k: v for k, v in opts.items() if v is not None}


def is_torchrun(word: str) -> bool:
    """`torchrun`, or a path to one (.venv/bin/torchrun): every rank gets an agent. Run as a
    script instead, the agent sat in the launcher and the ranks ran bare."""
    return os.path.basename(word) == "torchrun"


def _interpreter_of(path: str) -> str | None:
    """The python a torchrun given by path runs with (its #! line), where it is one."""
    try:
        first = files.read_head(path, 4096).split(b"\n", 1)[0]  # (a FIFO named torchrun is not waited on)
    except OSError:
        return None
    words = first[2:].split() if first.startswith(b"#!") else []
    python = words[0].decode(errors="replace") if words else ""
    return python if _looks_like_python(python) and os.path.isfile(python) else None


def interpreter(word: str, quiet: bool = False) -> str:
    """The python `stepdbg python ...` runs the script with. A path: that one. A bare word
    (`python`): the one the PATH finds, unless it has no torch and stepdbg's own interpreter
    has (`.venv/bin/stepdbg python train.py` in a shell that never activated the venv found
    the system's python and failed on `import torch`): then stepdbg's own, said on stderr."""
    found = shutil.which(word) or (word if os.path.exists(word) else None)
    if found is None:
        raise UsageError(f"interpreter {word!r} not found")
    if os.sep in word or os.path.dirname(os.path.abspath(found)) == os.path.dirname(sys.executable) \
            or importlib.util.find_spec("torch") is None:  # (a path, the same environment, none better)
        return found
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    try:
        has_torch = subprocess.run([found, "-c", probe], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        has_torch = False
    if has_torch:
        return found
    if not quiet:
        say(f"stepdbg: `{word}` on the PATH has no torch ({found});\n"
            f"  the script runs under stepdbg's own interpreter: {sys.executable}")
    return sys.executable


def _looks_like_python(word: str) -> bool:
    base = os.path.basename(word)
    return base.startswith("python") or base in ("py", "pypy", "pypy3")
