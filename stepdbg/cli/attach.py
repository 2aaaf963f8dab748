"""`stepdbg attach`: the TUI or the line console on a running job (no torch)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..client import connect, connect_address
from ..wire import files, sessions
from ..wire.fold import say
from .common import Parser, UsageError, at_terminal
from .ls import launcher_gone_output, with_status

ATTACH_DESCRIPTION = """\
Attach to a running job: the TUI at a terminal, the line console otherwise (or with
--repl). The job goes on as it was when you detach.

TARGET: a session id or pid, a socket path, HOST:PORT (its token from --token-file or
STEPDBG_TOKEN), or
ssh://[user@]host[:port][/session]; a distributed job: its id (torchrun run id or SLURM
job id), ssh://node/JOB or slurm:JOBID (its nodes from squeue), every rank on every node
(the other nodes are reached over ssh as the same user); none: the only local session or
job (stepdbg ls lists them)."""

ATTACH_EPILOG = """\
examples:
  stepdbg attach                          # the only job on this machine
  stepdbg attach 4242                     # by session id or pid
  stepdbg attach ssh://me@node17          # the only job on node17, over ssh
  stepdbg attach ssh://node17/my-run-id   # every rank of a torchrun job
  stepdbg attach slurm:4242               # every rank of SLURM job 4242, from a login node
  stepdbg attach --repl                   # the line console

leaving: in the TUI, q asks what becomes of the job (continue it, leave it paused, end it
with exit code 3); at the line console, `detach` leaves it as it is (`detach continue`,
`detach end`) and `q` ends it. A paused job waits for the next attach.

exit codes: 0 when you detach; the job's exit code when it ends while attached; 1 when
the connection is lost or refused."""


def attach_parser() -> Parser:
    p = Parser(prog="stepdbg attach", usage="%(prog)s [TARGET] [--token-file FILE] [--repl]",
               description=ATTACH_DESCRIPTION, epilog=ATTACH_EPILOG)
    p.add_argument("target", nargs="?", metavar="TARGET", help="the job (default: the only one here)")
    p.add_argument("--token-file", metavar="FILE",
                   help="a file holding the session token, for a HOST:PORT target (or set STEPDBG_TOKEN); "
                        "never on the command line, where every local user can read it in ps")
    p.add_argument("--token", help=argparse.SUPPRESS)
    p.add_argument("--repl", action="store_true", help="the line console instead of the TUI")
    return p


def main(argv: list[str]) -> int:
    ns = attach_parser().parse_args(argv)
    if ns.token is not None:
        raise UsageError("--token would show the token to every local user (ps); use --token-file FILE or "
                         "STEPDBG_TOKEN")
    target, token, repl = ns.target, read_token(ns.token_file), ns.repl
    _say_where_output_goes(target)
    if not repl and at_terminal():
        from stepdbg_tui.launch import attach_tui

        endpoints = job_endpoints(target)
        if endpoints is not None:
            first = [endpoints]  # a reconnect (ctrl+r) finds the ranks again

            return attach_tui(None, None, lambda: first.pop() if first else job_endpoints(target) or [],
                              again=f"stepdbg attach {target or ''}".rstrip())
        return attach_tui(target, token)
    from ..client.console import attach_console

    client: Any = open_job(target)
    if client is None:
        client = connect(target, token=token)
    try:
        if at_terminal():  # --repl at a terminal: line editing, history, completion
            from stepdbg_tui.repl import run_repl

            return run_repl(client)
        return attach_console(client)
    except KeyboardInterrupt:
        client.close()
        print("\nstepdbg: detached (the job goes on as it was)", file=sys.stderr)
        return 0


def _say_where_output_goes(target: str | None) -> None:
    """A job whose TUI launcher went away prints to a file now: said once, on stderr."""
    from ..client.targets import TargetError, find_local

    if target is not None and (target.startswith(("ssh://", "slurm:")) or ":" in target):
        return
    try:
        info = find_local(target, clean=False)  # (a job gone is said by the connect after, once)
    except (TargetError, OSError):
        return  # (connecting says what is wrong)
    output = launcher_gone_output(info)
    if output is not None:
        say(f"stepdbg: the job's launcher is gone; its output goes to {output}")


def read_token(path: str | None) -> str | None:
    """The token from --token-file, else STEPDBG_TOKEN, else None."""
    if path is None:
        token = os.environ.get("STEPDBG_TOKEN")
        if token is not None and len(token) > files.TOKEN_LIMIT:
            raise UsageError(f"STEPDBG_TOKEN is {len(token):,} characters long; a token is at most "
                             f"{files.TOKEN_LIMIT:,}")
        return token
    try:  # (a regular file of a few KB: /dev/zero or a FIFO is refused, not read until the OOM killer)
        token = files.read_capped(os.path.expanduser(path), files.TOKEN_LIMIT).decode("utf-8").strip()
    except OSError as e:
        raise UsageError(f"--token-file {path!r}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--token-file {path!r} is not text (UTF-8)") from None
    if not token:
        raise UsageError(f"--token-file {path!r} is empty")
    return token


def open_job(target: str | None) -> Any:
    """A Job over every rank when TARGET names a distributed job (locally or ssh://), else None."""
    from ..client.job import Job

    endpoints = job_endpoints(target)
    if endpoints is None:
        return None
    clients: list[Any] = []
    try:
        for ep in endpoints:
            clients.append(connect_address(ep.address, ep.token, closer=ep.close))
    except BaseException:
        for c in clients:
            c.close()
        for ep in endpoints[len(clients) + 1:]:  # tunnels no client holds yet
            if ep.close is not None:
                ep.close()
        raise
    job = Job(clients)
    job.again = target or clients[0].session.get("job_id") or ""  # (a rank's id would attach to that rank alone)
    return job


def job_endpoints(target: str | None) -> list[Any] | None:
    """Every rank's endpoint, in rank order, when TARGET names a distributed job: on this
    machine, or ssh://node/JOB; ranks on other nodes are reached over ssh to each node."""
    from ..client.remote import job_endpoints as gather
    from ..client.remote import job_rows

    if target is not None and target.startswith("ssh://"):
        found = job_rows(target)
        return gather(*found) if found is not None else None
    if target is not None and target.startswith("slurm:"):
        from ..client.slurm import job_rows_of

        return gather(*job_rows_of(target.removeprefix("slurm:")))
    job = _job_target(target)
    if job is None:
        return None
    from ..client import find_job

    return gather(None, [with_status(s, with_token=True) for s in find_job(job)])


def _job_target(target: str | None) -> str | None:
    """The job id when TARGET names a distributed job (or, with no TARGET, when the local
    sessions are the ranks of one job); else None."""
    if target is not None and (target.startswith("ssh://") or os.path.sep in target):
        return None
    live = sessions.listing(clean=False)  # (a job gone is said by the connect after, once)
    jobs = {s.job_id for s in live if s.job_id is not None and (s.world_size or 1) > 1}
    if target is None:
        return next(iter(jobs)) if len(jobs) == 1 and all(s.job_id in jobs for s in live) else None
    return target if target in jobs else None
