"""The `stepdbg` command line.

    stepdbg [run] [OPTIONS] [python] train.py ARGS...
    stepdbg [run] [OPTIONS] [python] -m package.module ARGS...

Options are stepdbg's until the script (or the interpreter, or -m) is named; every
argument after it goes to the script untouched. The script runs in a fresh interpreter
with the agent installed before its first line (``python -m stepdbg.agent.bootstrap``), so
its ``__main__``, stdout/stderr and exit code are its own.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any

from .. import __version__
from ..wire.conditions import ACTIONS, ConditionError, parse
from ..wire.conditions import HELP as CONDITIONS_HELP

EXIT_USAGE = 2

USAGE = """\
usage: stepdbg [run] [OPTIONS] [python] SCRIPT.py [ARGS...]
       stepdbg [run] [OPTIONS] [python] -m MODULE [ARGS...]
       stepdbg serve [--listen HOST:PORT] [OPTIONS] [python] SCRIPT.py [ARGS...]
       stepdbg [OPTIONS] torchrun [TORCHRUN OPTIONS] SCRIPT.py [ARGS...]
       stepdbg doctor [--steps N] [--json] [OPTIONS] [python] SCRIPT.py [ARGS...]
       stepdbg overfit [--steps N] [OPTIONS] [python] SCRIPT.py [ARGS...]
       stepdbg attach [TARGET] [--token TOKEN] [--repl]
       stepdbg ls [--json] [ssh://[user@]host[:port]]
       stepdbg hook install|remove|status     (STEPDBG_AUTOSTART=1 then starts an agent in scripts)

Run a PyTorch training script under stepdbg: it breaks when a condition holds
(a NaN, an exploding gradient, a stalled dataloader, an exception, ...) and reports,
replays, skips, aborts or pauses there. At a terminal, `run` opens the TUI (the job's
output goes to its Log panel, and to the terminal when the TUI closes); elsewhere it
runs headless. Every job is attachable from another shell (stepdbg attach, the TUI at
a terminal, --repl for a line console); `serve` runs headless and waits for a client
at each break.

options (run and serve):
  --break SPEC        break when SPEC holds (repeatable; default: nan and exception)
  --on-break ACTION   what to do at a break, in order (repeatable; default: report,
                      or pause for serve):
                        report  write the break to the report and go on
                        replay  re-run the step under anomaly detection; name the op
                        skip    do not apply this step's update
                        abort   end the script with exit code 3
                        pause   wait for a client (stepdbg attach), or at the terminal
  --report FILE       write JSON lines, one event per line, flushed as written
  --listen HOST:PORT  also accept TCP (default host 127.0.0.1; the token is still required)
  --detach-timeout S  a paused job with no client left resumes by itself after S seconds
  --forward-output    also send the job's stdout/stderr lines to clients (output events;
                      the job then sees pipes, not a terminal, on fds 1 and 2)
  --no-tui            at a terminal, run headless instead of opening the TUI
  -q, --quiet         no stepdbg messages on stderr (the report still gets everything)
  --help-conditions   list every condition spec
  -h, --help          this text;   --version   the version

doctor: run the first N steps (default 20) with every rule on, then print the findings
(exit 1 when there are any, 0 when none). overfit: feed the first DataLoader batch
again and again for N steps (default 100) and say whether the loss reaches near zero.

TARGET (attach): a session id or pid, a socket path, HOST:PORT (with --token), or
ssh://[user@]host[:port][/session]; none: the only local session.

examples:
  stepdbg python train.py --lr 3e-4
  stepdbg --break nan --on-break replay --on-break abort --report run.jsonl train.py
  stepdbg --break 'grad_norm>100' --break 'expr:loss > 4 and step > 100' -m mypkg.train
  stepdbg serve --break nan python train.py          # then, in another shell:
  stepdbg attach                                     # or: stepdbg attach ssh://me@node17
  stepdbg ls --json
  stepdbg --break nan --report r.jsonl torchrun --nproc_per_node=2 train.py   # r.rank0.jsonl, r.rank1.jsonl
  stepdbg doctor --steps 30 python train.py        # a lint for the first minute of a run
  stepdbg overfit --steps 200 python train.py

exit codes: the script's own; 2 for bad stepdbg options; 3 when abort (or a client) ended it.
attach: 0 when you detach; the job's exit code when it ends while attached; 1 when
the connection is lost or refused.
"""


class UsageError(Exception):
    pass


@dataclass
class RunConfig:
    breaks: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    report: str | None = None
    quiet: bool = False
    serve: bool = False
    listen: str | None = None
    detach_timeout: float | None = None
    forward_output: bool = False
    tui: bool = True
    doctor: dict[str, Any] | None = None
    torchrun: list[str] | None = None  # torchrun's own arguments: every rank gets an agent  # doctor/overfit: {"steps": N, "overfit": bool, "json": bool}
    python: str = sys.executable
    module: str | None = None
    script: str | None = None
    args: list[str] = field(default_factory=list)

    def to_env(self) -> str:
        return json.dumps({
            "breaks": self.breaks or ["nan", "exception"],
            "actions": self.actions or (["pause"] if self.serve else ["report"]),
            "actions_given": bool(self.actions),
            "report": self.report,
            "quiet": self.quiet,
            "serve": self.serve,
            "listen": self.listen,
            "detach_timeout": self.detach_timeout,
            "forward_output": self.forward_output,
            "doctor": self.doctor,
        })


def parse_args(argv: list[str]) -> RunConfig | str:
    """Parse the command line; returns a config to run, or text to print and exit 0."""
    cfg = RunConfig()
    i = 0
    if argv and argv[0] in ("run", "serve"):
        cfg.serve = argv[0] == "serve"
        i = 1
    elif argv and argv[0] in ("doctor", "overfit"):
        cfg.doctor = {"steps": 20 if argv[0] == "doctor" else 100, "overfit": argv[0] == "overfit", "json": False}
        cfg.tui = False
        i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            return USAGE
        if a == "--version":
            return f"stepdbg {__version__}"
        if a == "--help-conditions":
            return CONDITIONS_HELP
        if a in ("-q", "--quiet"):
            cfg.quiet = True
            i += 1
            continue
        if a == "--forward-output":
            cfg.forward_output = True
            i += 1
            continue
        if a == "--no-tui":
            cfg.tui = False
            i += 1
            continue
        if cfg.doctor is not None and a == "--json":
            cfg.doctor["json"] = True
            i += 1
            continue
        if cfg.doctor is not None and a.partition("=")[0] == "--steps":
            raw = a.partition("=")[2] or (argv[i + 1] if i + 1 < len(argv) else "")
            if not raw.isdigit() or int(raw) < 1:
                raise UsageError(f"--steps needs a whole number of steps >= 1, not {raw!r}")
            cfg.doctor["steps"] = int(raw)
            i += 1 if "=" in a else 2
            continue
        name, eq, val = a.partition("=")
        if name in ("--break", "--on-break", "--report", "--listen", "--detach-timeout"):
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"{name} needs a value")
                val = argv[i + 1]
                i += 1
            i += 1
            if name == "--break":
                parse(val)  # raises ConditionError with the spec and the problem
                cfg.breaks.append(val)
            elif name == "--on-break":
                if val not in ACTIONS:
                    raise UsageError(f"unknown --on-break action {val!r}; known: {', '.join(ACTIONS)}")
                cfg.actions.append(val)
            elif name == "--listen":
                host, sep, port = val.rpartition(":")
                if not sep or not port.isdigit():
                    raise UsageError(f"--listen {val!r}: expected HOST:PORT or :PORT, e.g. 127.0.0.1:5678")
                cfg.listen = val if host else f"127.0.0.1:{port}"
            elif name == "--detach-timeout":
                try:
                    cfg.detach_timeout = float(val)
                except ValueError:
                    raise UsageError(f"--detach-timeout {val!r} is not a number of seconds") from None
            else:
                cfg.report = val
            continue
        if a.startswith("-") and a != "-m":
            raise UsageError(f"unknown option {a!r} (stepdbg options come before the script; see --help)")
        break
    rest = argv[i:]
    if not rest:
        raise UsageError("no script to run; e.g. 'stepdbg python train.py' (see --help)")
    if rest[0] == "torchrun":
        script_at = next((k for k, a in enumerate(rest[1:], 1) if a.endswith(".py") or a == "-m"), None)
        if script_at is None:
            raise UsageError("torchrun: no SCRIPT.py (or -m MODULE) found after the torchrun options")
        cfg.torchrun = rest[1:script_at]
        rest = rest[script_at:]
    if _looks_like_python(rest[0]) and not rest[0].endswith(".py"):
        found = shutil.which(rest[0]) or (rest[0] if os.path.exists(rest[0]) else None)
        if found is None:
            raise UsageError(f"interpreter {rest[0]!r} not found")
        cfg.python = found
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
        raise UsageError(f"expected a script or -m MODULE, got {' '.join(rest) or 'nothing'!r}")
    if cfg.report:
        d = os.path.dirname(os.path.abspath(cfg.report))
        if not os.path.isdir(d):
            raise UsageError(f"--report {cfg.report!r}: folder {d!r} does not exist")
    return cfg


def _has_option(args: list[str], *names: str) -> bool:
    return any(a in names or a.startswith(tuple(f"{n}=" for n in names if n.startswith("--"))) for a in args)


def _nproc(torchrun_args: list[str]) -> int:
    """--nproc_per_node from torchrun's arguments (the TUI waits for that many ranks)."""
    for i, a in enumerate(torchrun_args):
        name, eq, val = a.partition("=")
        if name in ("--nproc_per_node", "--nproc-per-node"):
            raw = val if eq else (torchrun_args[i + 1] if i + 1 < len(torchrun_args) else "1")
            return int(raw) if raw.isdigit() else os.cpu_count() or 1
    return 1


def _at_terminal() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


def _looks_like_python(word: str) -> bool:
    base = os.path.basename(word)
    return base.startswith("python") or base in ("py", "pypy", "pypy3")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("attach", "ls", "hook"):
        from . import attach as frontend_cli

        return frontend_cli.main(argv)
    try:
        cfg = parse_args(argv)
    except (UsageError, ConditionError) as e:
        print(f"stepdbg: {e}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(cfg, str):
        print(cfg)
        return 0
    return launch(cfg)


def launch(cfg: RunConfig) -> int:
    """Headless: replace this process with the interpreter running the script under the
    agent. At a terminal (run, not serve): the job as a child, the TUI in front."""
    with_tui = cfg.tui and not cfg.serve and _at_terminal()
    if with_tui:
        cfg.serve = True  # a break waits for the TUI, which attaches as soon as it can
    env = dict(os.environ)
    env["STEPDBG_CONFIG"] = cfg.to_env()
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    target = ["-m", cfg.module] if cfg.module else [cfg.script]
    cmd = [cfg.python, "-m", "stepdbg.agent.bootstrap", *target, *cfg.args]
    if cfg.torchrun is not None:  # every rank runs `python -m stepdbg.agent.bootstrap SCRIPT ARGS`
        tee = ["--tee", "3"] if with_tui and not _has_option(cfg.torchrun, "--tee", "-t", "--redirects", "-r") else []
        cmd = [cfg.python, "-m", "torch.distributed.run", *tee, *cfg.torchrun, "-m", "stepdbg.agent.bootstrap", *target,
               *cfg.args]
    if with_tui:
        from stepdbg_tui.launch import launch_tui

        return launch_tui(cmd, env, ranks=_nproc(cfg.torchrun) if cfg.torchrun is not None else None)
    if cfg.doctor is not None:
        from stepdbg_tui.doctor import run_doctor

        return run_doctor(cmd, env, cfg.report, cfg.doctor)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(cfg.python, cmd, env)
    except OSError as e:
        print(f"stepdbg: cannot run {cfg.python}: {e}", file=sys.stderr)
        return 127
    return 0  # not reached
