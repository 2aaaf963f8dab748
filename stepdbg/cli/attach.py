"""`stepdbg attach` and `stepdbg ls`: the client side of the command line (no torch)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from ..client import ClientError, TargetError, connect, connect_address, format_listing
from ..wire import sessions

EXIT_FAILED = 1
EXIT_USAGE = 2


def main(argv: list[str]) -> int:
    cmd, args = argv[0], argv[1:]
    try:
        if cmd == "attach":
            return attach(args)
        if cmd == "hook":
            return hook(args)
        return ls(args)
    except (TargetError, ClientError) as e:
        print(f"stepdbg: {e}", file=sys.stderr)
        return EXIT_FAILED
    except _Usage as e:
        print(f"stepdbg {cmd}: {e}", file=sys.stderr)
        return EXIT_USAGE


class _Usage(Exception):
    pass


def attach(args: list[str]) -> int:
    target, token = None, os.environ.get("STEPDBG_TOKEN")
    repl = "--repl" in args
    args = [a for a in args if a != "--repl"]
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-h", "--help"):
            print("usage: stepdbg attach [TARGET] [--token TOKEN] [--repl]\n"
                  "TARGET: a session id or pid, a socket path, HOST:PORT, or ssh://[user@]host[:port][/session];\n"
                  "a distributed job: its id (torchrun run id or SLURM job id) or ssh://node/JOB, every rank on\n"
                  "every node (the other nodes are reached over ssh as the same user);\n"
                  "none: the only local session or job (stepdbg ls lists them).\n"
                  "At a terminal it opens the TUI; --repl (or no terminal) gives the line console.")
            return 0
        if a == "--token":
            if i + 1 >= len(args):
                raise _Usage("--token needs a value")
            token, i = args[i + 1], i + 2
            continue
        if a.startswith("-"):
            raise _Usage(f"unknown option {a!r}")
        if target is not None:
            raise _Usage(f"one TARGET only (got {target!r} and {a!r})")
        target, i = a, i + 1
    from . import _at_terminal

    if not repl and _at_terminal():
        from stepdbg_tui.launch import attach_tui

        endpoints = job_endpoints(target)
        if endpoints is not None:
            first = [endpoints]  # a reconnect (ctrl+r) finds the ranks again

            return attach_tui(None, None, lambda: first.pop() if first else job_endpoints(target) or [])
        return attach_tui(target, token)
    from ..client.console import attach_console

    client: Any = open_job(target)
    if client is None:
        client = connect(target, token=token)
    try:
        if _at_terminal():  # --repl at a terminal: line editing, history, completion
            from stepdbg_tui.repl import run_repl

            return run_repl(client)
        return attach_console(client)
    except KeyboardInterrupt:
        client.close()
        print("\nstepdbg: detached (the job goes on as it was)", file=sys.stderr)
        return 0


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
    return Job(clients)


def job_endpoints(target: str | None) -> list[Any] | None:
    """Every rank's endpoint, in rank order, when TARGET names a distributed job: on this
    machine, or ssh://node/JOB; ranks on other nodes are reached over ssh to each node."""
    from ..client.remote import job_endpoints as gather
    from ..client.remote import job_rows

    if target is not None and target.startswith("ssh://"):
        found = job_rows(target)
        return gather(*found) if found is not None else None
    job = _job_target(target)
    if job is None:
        return None
    from ..client import find_job

    return gather(None, [_with_status(s, with_token=True) for s in find_job(job)])


def _job_target(target: str | None) -> str | None:
    """The job id when TARGET names a distributed job (or, with no TARGET, when the local
    sessions are the ranks of one job); else None."""
    if target is not None and (target.startswith("ssh://") or os.path.sep in target):
        return None
    live = sessions.listing()
    jobs = {s.job_id for s in live if s.job_id is not None and (s.world_size or 1) > 1}
    if target is None:
        return next(iter(jobs)) if len(jobs) == 1 and all(s.job_id in jobs for s in live) else None
    return target if target in jobs else None


def ls(args: list[str]) -> int:
    as_json = "--json" in args
    with_token = "--with-token" in args
    rest = [a for a in args if a not in ("--json", "--with-token")]
    if any(a.startswith("-") for a in rest) or len(rest) > 1:
        raise _Usage("usage: stepdbg ls [--json] [ssh://[user@]host[:port]]")
    if rest:
        if not rest[0].startswith("ssh://"):
            raise _Usage(f"{rest[0]!r}: only ssh:// hosts can be listed")
        from ..client.remote import remote_listing, ssh_target

        rows = remote_listing(ssh_target(rest[0]))
    else:
        rows = [_with_status(s, with_token) for s in sessions.listing()]
    if as_json:
        print(json.dumps(rows))
    elif not rows:
        print("no stepdbg sessions")
    else:
        infos = [sessions.SessionInfo(**{k: v for k, v in r.items() if k in sessions.SessionInfo.__dataclass_fields__},
                                      token="") for r in rows]
        lines = format_listing(infos).splitlines()
        print(f"{lines[0]}  STEP    STATE")
        for line, r in zip(lines[1:], rows, strict=True):
            print(f"{line}  {r.get('step', '?')!s:<7} {r.get('state', '?')}")
    return 0


def _with_status(info: sessions.SessionInfo, with_token: bool) -> dict:
    row = info.public(with_token=with_token)
    try:
        c = connect_address(info.address, info.token, timeout=3, probe=True)
        try:
            st = c.status()
            waits_in = (st.get("waiting") or {}).get("collective")
            row.update(step=st["step"], state="in collective" if waits_in else st["state"], phase=st["phase"])
            if with_token and (info.world_size or 1) > 1:  # attaching: where the job's other ranks run
                row["nodes"] = {int(r): n for r, n in c.call("job_nodes")["nodes"].items()}
        finally:
            c.close()
    except (TargetError, ClientError, ConnectionError, TimeoutError, OSError) as e:
        row.update(state=f"unreachable: {e}")
    return row


HOOK_NAME = "stepdbg-autostart.pth"
HOOK_LINE = ("import os; exec('try:\\n import stepdbg.agent.autostart\\nexcept Exception as e:\\n import sys; "
             "print(\\'stepdbg: autostart failed:\\', e, file=sys.stderr)') "
             "if os.environ.get('STEPDBG_AUTOSTART') else None\n")


def hook(args: list[str]) -> int:
    """stepdbg hook install|remove|status: the STEPDBG_AUTOSTART switch in this environment."""
    import sysconfig

    path = os.path.join(sysconfig.get_paths()["purelib"], HOOK_NAME)
    what = args[0] if args else "status"
    if what == "install":
        with open(path, "w") as f:
            f.write(HOOK_LINE)
        print(f"installed {path}: STEPDBG_AUTOSTART=1 (or =nan,grad_norm>100) now starts an agent in scripts")
    elif what == "remove":
        if os.path.exists(path):
            os.unlink(path)
        print(f"removed {path}")
    elif what == "status":
        print(f"{'installed' if os.path.exists(path) else 'not installed'}: {path}")
    else:
        raise _Usage("usage: stepdbg hook install|remove|status")
    return 0
