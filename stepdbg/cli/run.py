"""`stepdbg [run] [OPTIONS] [python] SCRIPT ...`, `stepdbg serve ...` and
`stepdbg [OPTIONS] torchrun [TORCHRUN OPTIONS] SCRIPT ...`: run a script under the agent.

The script runs in a fresh interpreter with the agent installed before its first line
(``python -m stepdbg.launch.bootstrap``), so its ``__main__``, stdout/stderr and exit
code are its own. At a terminal, `run` opens the TUI with the job as a child.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

from ..wire import sessions
from ..wire.fold import say
from ..wire.numbers import ascii_int
from . import help_text
from .common import (
    Launch,
    Parser,
    UsageError,
    add_run_options,
    at_terminal,
    is_torchrun,
    run_config,
)

RUN_DESCRIPTION = """\
Run a PyTorch training script under stepdbg: it breaks when a condition holds (a NaN,
an exploding gradient, a stalled dataloader, an exception, ...) and reports, replays,
skips, aborts or pauses there. At a terminal it opens the TUI (the job's output goes to
its Log panel, and to the terminal when the TUI closes; if stepdbg is killed or its
terminal closes, the job goes on and `stepdbg ls` names the file its output goes to);
elsewhere it runs headless. Every job is attachable from another shell (stepdbg attach).

commands (each has its own --help):
  stepdbg [run] [OPTIONS] [python] SCRIPT.py [ARGS...]     run a script (this text)
  stepdbg serve [OPTIONS] [python] SCRIPT.py [ARGS...]     headless; a break waits for a client
  stepdbg [OPTIONS] torchrun [TORCHRUN OPTIONS] SCRIPT.py  every rank under an agent
  stepdbg doctor [--steps N] [--json] SCRIPT.py            the first N steps with every rule on
  stepdbg overfit [--steps N] SCRIPT.py                    can the model fit one batch?
  stepdbg diff [--steps N] "COMMAND A" "COMMAND B"         where two runs first differ
  stepdbg attach [TARGET]                                  the TUI (or --repl) on a running job
  stepdbg replay [--json] [--device D] BUNDLE              replay a saved step (--on-break save)
  stepdbg ls [--json] [ssh://host]                         the jobs you can attach to
  stepdbg hook install|remove|status                       STEPDBG_AUTOSTART=1 starts an agent"""

RUN_EPILOG = """\
actions (--on-break, in order; default: pause while a front end is attached:
  the TUI at a terminal, a `stepdbg attach`; else report):
  report  write the break to the report and go on
  replay  re-run the step under anomaly detection; name the op
  save    write the step's evidence bundle (stepdbg-stepN/ under --bundle-dir) for
          `stepdbg replay PATH` later, or elsewhere
  skip    do not apply this step's update
  rewind  put the run back to the newest snapshot before the break, in place, and go on
          (needs --keep-every N; the batches since the snapshot are skipped)
  abort   end the script with exit code 3
  pause   wait for a client (stepdbg attach), or at the terminal

examples:
  stepdbg python train.py --lr 3e-4
  stepdbg --break nan --on-break replay --on-break abort --report run.jsonl train.py
  stepdbg --break 'grad_norm>100' --break 'expr:loss > 4 and step > 100' -m mypkg.train
  stepdbg serve --break nan python train.py          # then, in another shell:
  stepdbg attach                                     # or: stepdbg attach ssh://me@node17
  stepdbg --break nan --on-break rewind --keep-every 50 --max-rewinds 3 train.py
  stepdbg --break nan --on-break save --on-break skip train.py    # then: stepdbg replay stepdbg-step*/
  stepdbg --break nan --report r.jsonl torchrun --nproc_per_node=2 train.py   # r.rank0.jsonl, ...

exit codes: the script's own; 2 for bad stepdbg options; 3 when abort (or a client) ended it."""

SERVE_DESCRIPTION = """\
Run the script headless and attachable: a break pauses it until a client attaches
(stepdbg attach, from this machine or over ssh). The attach command is printed at start.
With --listen it also accepts TCP; a client then needs the session's token, which
`stepdbg ls --json --with-token` shows to the job's user on its machine."""

SERVE_EPILOG = """\
examples:
  stepdbg serve --break nan python train.py
  stepdbg serve --break 'grad_norm>100' --detach-timeout 600 train.py
  stepdbg serve -q --break step==2 torchrun --nproc_per_node=2 train.py"""

TORCHRUN_HELP = """\
usage: stepdbg [OPTIONS] torchrun [TORCHRUN OPTIONS] SCRIPT.py [ARGS...]
       stepdbg serve [OPTIONS] torchrun [TORCHRUN OPTIONS] SCRIPT.py [ARGS...]

Run a distributed job with torchrun, every rank under its own agent: a break on one
rank pauses every rank at the same step, before the update and outside any collective;
the collective timeout is raised while a client is attached. Reports go one file per
rank (r.jsonl → r.rank0.jsonl, r.rank1.jsonl). At a terminal the TUI opens over every
rank (its Ranks panel); `stepdbg attach JOB` reaches a running job, on other nodes too.
OPTIONS are the run options (stepdbg --help); TORCHRUN OPTIONS go to torchrun as given.

examples:
  stepdbg --break nan torchrun --nproc_per_node=2 train.py
  stepdbg --break nan --on-break rewind --keep-every 50 --max-rewinds 3 torchrun --nproc_per_node=2 train.py
  stepdbg --break nan --report r.jsonl torchrun --nproc_per_node=2 train.py
  stepdbg serve --break 'grad_norm>100' torchrun --nnodes=2 --node_rank=0 train.py"""


def run_parser(serve: bool) -> Parser:
    p = Parser(prog="stepdbg serve" if serve else "stepdbg",
               usage="%(prog)s [OPTIONS] [python] SCRIPT.py [ARGS...] | -m MODULE [ARGS...]",
               description=SERVE_DESCRIPTION if serve else RUN_DESCRIPTION,
               epilog=SERVE_EPILOG if serve else RUN_EPILOG)
    add_run_options(p, tui=not serve)
    return p


def main(argv: list[str], serve: bool = False) -> int:
    ns = run_parser(serve).parse_args(argv)
    if is_torchrun(ns.script) and _asks_help(ns.args):  # (at the terminal's width, as argparse's texts)
        print(help_text.fill(TORCHRUN_HELP, shutil.get_terminal_size().columns - 2))
        return 0
    return launch(run_config(ns, serve=serve))


def _asks_help(torchrun_args: list[str]) -> bool:
    for a in torchrun_args:
        if a.endswith(".py") or a == "-m":
            return False
        if a in ("-h", "--help"):
            return True
    return False


def _has_option(args: list[str], *names: str) -> bool:
    return any(a in names or a.startswith(tuple(f"{n}=" for n in names if n.startswith("--"))) for a in args)


def nproc(torchrun_args: list[str]) -> int:
    """--nproc_per_node from torchrun's arguments (the TUI waits for that many ranks)."""
    for i, a in enumerate(torchrun_args):
        name, eq, val = a.partition("=")
        if name in ("--nproc_per_node", "--nproc-per-node"):
            raw = val if eq else (torchrun_args[i + 1] if i + 1 < len(torchrun_args) else "1")
            return ascii_int(raw) or os.cpu_count() or 1
    return 1


def command(cfg: Launch, tee: bool = False) -> list[str]:
    """The command line of the job: the interpreter (or torchrun) running bootstrap."""
    target = ["-m", cfg.module] if cfg.module else [cfg.script or ""]
    if cfg.torchrun is None:
        return [cfg.python, "-m", "stepdbg.launch.bootstrap", *target, *cfg.args]
    # Every rank runs `python -m stepdbg.launch.bootstrap SCRIPT ARGS`.
    from ..client.job import TORCHRUN_LOGS
    # With the TUI: torchrun copies the ranks' output, `[default0]:` before each line, from files
    # in a folder of the launcher's own (it reads their sizes to keep each rank's lines in order).
    tee_args = ["--tee", "3", "--log-dir", tempfile.mkdtemp(prefix=TORCHRUN_LOGS)] if tee and not _has_option(
        cfg.torchrun, "--tee", "-t", "--redirects", "-r", "--log-dir", "--log_dir") else []
    # torchrun unbuffered (-u, its own interpreter alone: the ranks' env is untouched): its copies of the
    # ranks' stdout (never flushed) came at its end in a shell without PYTHONUNBUFFERED, after the break
    # its stderr had brought at once (`step 5 loss` after `break at step 6`: the seventeenth walk's 4)
    return [cfg.python, "-u", "-m", "torch.distributed.run", *tee_args, *cfg.torchrun, "-m",
            "stepdbg.launch.bootstrap", *target, *cfg.args]


def job_env(cfg: Launch) -> dict[str, str]:
    env = dict(os.environ)
    env["STEPDBG_CONFIG"] = cfg.agent.to_json()
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    return env


def launch(cfg: Launch) -> int:
    """Headless: replace this process with the interpreter running the script under the
    agent. At a terminal (run, not serve): the job as a child, the TUI in front."""
    check_runtime_dir()
    with_tui = cfg.tui and not cfg.agent.serve and at_terminal()
    if with_tui:
        cfg.serve_for_tui()
    env = job_env(cfg)
    cmd = command(cfg, tee=with_tui)
    if with_tui:
        from stepdbg_tui.launch import launch_tui

        return launch_tui(cmd, env, ranks=nproc(cfg.torchrun) if cfg.torchrun is not None else None)
    sys.stdout.flush()
    sys.stderr.flush()
    if cfg.torchrun is not None:
        return run_torchrun(cmd, env)
    try:
        os.execve(cfg.python, cmd, env)
    except OSError as e:
        say(f"stepdbg: cannot run {cfg.python}: {e}")
        return 127
    return 0  # not reached


def check_runtime_dir() -> None:
    """The folder the job's socket and token go to, checked before the job starts: one open
    to other users is refused in one line (exit 2) that says what to do, not made private
    behind the user's back by a job that then no client could find."""
    try:
        sessions.trusted_dir()
    except PermissionError as e:  # (its words say what to do: sessions._not_ours, which `stepdbg ls` says too)
        raise UsageError(str(e)) from None


def run_torchrun(cmd: list[str], env: dict[str, str]) -> int:
    """torchrun as a child, not exec'd: a job that stepdbg ended (--on-break abort, a
    client's end) exits 3 as a single process does, not torchrun's 1, and torchrun's
    failure report for it gives way to one line. Ctrl-C and SIGTERM go to torchrun; if
    this process is killed, so is torchrun (PR_SET_PDEATHSIG), and torchrun ends the ranks."""
    import signal
    import subprocess

    from ..client.ended_report import EndedReport

    def die_with_parent() -> None:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    child = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1,
                             preexec_fn=die_with_parent if sys.platform == "linux" else None)
    def forward(n: int, _frame: object) -> None:
        report.interrupted = report.interrupted or n == signal.SIGINT  # (torchrun's traceback of it: one line)
        if n == signal.SIGINT and _foreground():
            return  # the terminal's Ctrl-C reached torchrun too: once is enough
        child.send_signal(n)

    report = EndedReport(auto=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    assert child.stderr is not None
    for line in child.stderr:
        for shown in report.feed(line.rstrip("\n")):
            print(shown, file=sys.stderr, flush=True)
    for shown in report.end():  # (a traceback the stream cut: held, it was never said)
        print(shown, file=sys.stderr, flush=True)
    code = child.wait()
    sessions.sweep()  # a rank torchrun killed after its grace period (or os._exit) left its files
    if report.hid:
        return report.code
    return code if code >= 0 else 128 - code


def _foreground() -> bool:
    """This process group owns the terminal (a Ctrl-C there went to all of it)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError):
        return False
