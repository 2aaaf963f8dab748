"""`stepdbg ls`: the jobs on this machine (or on an ssh host) that you can attach to, and
for one whose TUI launcher went away, the file its output goes to."""

from __future__ import annotations

import json
import os
import shutil
import sys

from ..client import ClientError, TargetError, connect_address, format_listing
from ..client.targets import fold, job_lines
from ..launch.keeper import output_path
from ..wire import sessions
from .common import Parser, UsageError


def main(argv: list[str]) -> int:
    p = Parser(prog="stepdbg ls", usage="%(prog)s [--json] [ssh://[user@]host[:port]]",
               description="List the stepdbg sessions you can attach to: id, pid, host, rank, script, step, state.",
               epilog="examples:\n  stepdbg ls\n  stepdbg ls --json\n  stepdbg ls ssh://me@node17")
    p.add_argument("host", nargs="?", metavar="ssh://[user@]host[:port]", help="list the sessions on that host")
    p.add_argument("--json", action="store_true", help="one JSON list")
    p.add_argument("--with-token", action="store_true",
                   help="include each session's token (what ssh attach reads; keep it private)")
    ns = p.parse_args(argv)
    if ns.host is not None:
        if not ns.host.startswith("ssh://"):
            raise UsageError(f"{ns.host!r}: only ssh:// hosts can be listed")
        from ..client.remote import remote_listing, ssh_target

        rows = remote_listing(ssh_target(ns.host))
    else:
        rows = [with_status(s, ns.with_token) for s in sessions.listing()]
    if ns.json:
        print(json.dumps(rows))
    elif not rows:
        print("no stepdbg sessions")
    else:
        infos = [sessions.SessionInfo(**{k: v for k, v in r.items() if k in sessions.SessionInfo.__dataclass_fields__},
                                      token="") for r in rows]
        width = _width()
        print(format_listing(infos, [("STEP", [str(r.get("step", "?")) for r in rows]),
                                     ("STATE", [str(r.get("state", "?")) for r in rows])], width))
        for line in job_lines(infos, width):  # a job's ranks, once, with its nodes
            print(line)
        for r in rows:
            if r.get("output"):
                print("\n".join(fold(f"{r['id']}: its launcher is gone; its output goes to {r['output']}", width)))
    return 0


def _width() -> int | None:
    """The terminal's columns (COLUMNS where set): the rows fold there; into a pipe, whole."""
    if not os.environ.get("COLUMNS") and not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def with_status(info: sessions.SessionInfo, with_token: bool) -> dict:
    """A session's public row, with its step and state asked of the job (a probe, not an attach)."""
    row = info.public(with_token=with_token)
    alias = sessions.short_alias(info.local) if with_token and info.local else None
    if alias is not None:  # what ssh forwards to when the socket's own path is too long for it
        row["alias"] = alias
    output = launcher_gone_output(info)
    if output is not None:
        row["output"] = output
    try:
        c = connect_address(info.reach, info.token, timeout=3, probe=True)
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


def launcher_gone_output(info: sessions.SessionInfo) -> str | None:
    """The file a job's output goes to since its TUI launcher went away (killed, its
    terminal closed), if it did: the keeper made it after the job started. It is named
    by the launcher's child: the job, or under torchrun the rank's parent."""
    for pid in (info.pid, _parent(info.pid)):
        path = output_path(pid) if pid else ""
        try:
            if path and os.stat(path).st_mtime >= info.started - 2:  # (2: a coarse clock)
                return path
        except OSError:
            continue
    return None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:  # (Linux; elsewhere a torchrun rank's file is not named)
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
