"""Remote attach over the system `ssh`, so the user's config, jump hosts, agent and keys work.

    ssh host stepdbg ls --json --with-token          # which sessions, their sockets and tokens
    ssh -N -L /tmp/stepdbg-ssh-XXXX/s.sock:/run/user/1000/stepdbg/4242.sock host

Environment: STEPDBG_SSH is the ssh command (default "ssh"; e.g. "ssh -F my_config"),
STEPDBG_REMOTE the stepdbg command on the remote host (default "stepdbg"; set it to a
full path when a non-interactive login's PATH does not have it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from ..wire import sessions, settings
from ..wire.address import SUN_PATH_MAX
from ..wire.rank_words import ranks_words
from .targets import Endpoint, TargetError, printable

SSH_TIMEOUT = 30.0
LISTING_CAP = 16 << 20  # bytes read of what `stepdbg ls` run over ssh answers (a session's row: a few hundred)


# What may reach the ssh command line. A leading "-" would be read as an option
# (-oProxyCommand=... runs a command), so names start with a letter, digit or "_".
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}|[0-9A-Fa-f:.]{2,45}")
_SOCKET = re.compile(r"/[A-Za-z0-9_./-]{1,4000}")


def host_name_ok(name: object) -> bool:
    """`name` may be given to ssh as a host: no user@, no :port, no leading '-'."""
    return isinstance(name, str) and _HOST.fullmatch(name) is not None


@dataclass(frozen=True)
class SshTarget:
    user: str | None
    host: str
    port: int | None
    session: str | None

    def __post_init__(self) -> None:
        if self.user is not None and not _USER.fullmatch(self.user):
            raise TargetError(f"{self.user!r} is not a user name ssh can be given")
        if not host_name_ok(self.host):
            raise TargetError(f"{self.host!r} is not a host name ssh can be given")
        if self.port is not None and not 0 < self.port < 65536:
            raise TargetError(f"port {self.port} is not from 1 to 65535")

    @property
    def dest(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


def ssh_target(url: str) -> SshTarget:
    m = re.fullmatch(r"ssh://(?:([^@/:]+)@)?(\[[^\]]+\]|[^/:@]+)(?::(\d+))?(?:/([^/]*))?/?", url)
    if not m:
        raise TargetError(f"{url!r} is not ssh://[user@]host[:port][/session]")
    user, host, port, session = m.groups()
    return SshTarget(user, host.strip("[]"), int(port) if port else None, session or None)


def _ssh(t: SshTarget) -> list[str]:
    try:
        cmd = settings.ssh_command()
    except settings.SettingError as e:
        raise TargetError(str(e)) from None
    if shutil.which(cmd[0]) is None:
        raise TargetError(f"{cmd[0]!r} not found: remote attach uses the system ssh client")
    if t.port:
        cmd += ["-p", str(t.port)]
    return cmd


def _explain(t: SshTarget, rc: int, stderr: str) -> str:
    stderr = printable(stderr)  # (another machine's text: no escape sequence reaches this terminal)
    err = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit code {rc}"
    low = stderr.lower()
    if rc == 255:
        if "permission denied" in low or "authentication" in low:
            return f"ssh to {t.dest} refused the login ({err}); check the user and your key or agent"
        if "could not resolve" in low or "name or service not known" in low:
            return f"cannot resolve {t.host} ({err})"
        return f"cannot reach {t.dest} over ssh ({err})"
    if rc == 127 or "command not found" in low or "no such file" in low:
        return (f"stepdbg is not installed on {t.host}, or not on the PATH of a non-interactive login "
                f"({err}); set STEPDBG_REMOTE to its full path there")
    return f"'stepdbg ls' on {t.host} failed: {err}"


def remote_listing(t: SshTarget, with_token: bool = False) -> list[dict[str, Any]]:
    """The sessions on the remote host, from `stepdbg ls --json` run there."""
    try:
        remote = settings.remote_command()
    except settings.SettingError as e:
        raise TargetError(str(e)) from None
    cmd = [*_ssh(t), "--", t.dest, *remote, "ls", "--json", *(["--with-token"] if with_token else [])]
    rc, stdout, stderr = _run_capped(cmd, t)
    if rc != 0:
        raise TargetError(_explain(t, rc, stderr))
    try:
        rows = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, RecursionError):
        raise TargetError(f"unexpected answer from 'stepdbg ls' on {t.host}: {stdout[:200]!r}") from None
    if not isinstance(rows, list):
        raise TargetError(f"'stepdbg ls' on {t.host} answered nonsense: a {type(rows).__name__}, not a list")
    for n, r in enumerate(rows):
        try:
            sessions.SessionInfo.from_json({"token": "", **r} if isinstance(r, dict) and not with_token else r)
        except ValueError as e:
            raise TargetError(f"'stepdbg ls' on {t.host} answered nonsense in row {n + 1}: {e}") from None
        r["host_url"] = f"ssh://{t.dest}" + (f":{t.port}" if t.port else "")
    return rows


def _run_capped(cmd: list[str], t: SshTarget) -> tuple[int, str, str]:
    """Run the ssh command: its exit code, stdout and stderr, within SSH_TIMEOUT. Each
    stream is read up to LISTING_CAP bytes; past that (or past the time) ssh is killed and
    it is one line (a remote that answered 1.5 GB was read whole, 4.4 GB here)."""
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    got = {out_fd: bytearray(), err_fd: bytearray()}
    deadline = time.monotonic() + SSH_TIMEOUT
    late = TargetError(f"ssh to {t.dest} did not answer in {SSH_TIMEOUT:g}s")
    try:
        with selectors.DefaultSelector() as sel:
            for fd in got:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise late
                for key, _ in sel.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if not chunk:
                        sel.unregister(key.fd)
                    got[key.fd] += chunk
                    if len(got[key.fd]) > LISTING_CAP:
                        raise TargetError(f"'stepdbg ls' over ssh to {t.dest} answered more than "
                                          f"{LISTING_CAP >> 20} MiB; not read further (a session's row is a few "
                                          "hundred bytes)")
        try:
            rc = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise late from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return rc, got[out_fd].decode(errors="replace"), got[err_fd].decode(errors="replace")


def open_tunnel(url: str) -> Endpoint:
    """List the remote sessions, forward a private local socket to the chosen one."""
    t = ssh_target(url)
    rows = remote_listing(t, with_token=True)
    if t.session is not None:
        rows = [r for r in rows if t.session in (r["id"], str(r["pid"]))]
        if not rows:
            raise TargetError(f"no session {t.session!r} on {t.host} (it may have ended); "
                              f"'stepdbg ls ssh://{t.dest}' lists them")
    if not rows:
        raise TargetError(f"no stepdbg session is running on {t.host} for {t.user or 'your user'}")
    if len(rows) > 1:
        ids = ", ".join(f"{r['id']} ({' '.join(r['argv'][1:2])})" for r in rows)
        raise TargetError(f"several sessions on {t.host}: {ids}; name one: {url.rstrip('/')}/ID")
    return _forward(t, rows)[0]


def job_rows(url: str) -> tuple[SshTarget, list[dict[str, Any]]] | None:
    """The ranks of the distributed job an ssh:// URL names (its /JOB part, or the only
    job there when the host runs nothing else); None when it names no job."""
    t = ssh_target(url)
    rows = remote_listing(t, with_token=True)
    jobs = {r.get("job_id") for r in rows if r.get("job_id") and (r.get("world_size") or 1) > 1}
    job = t.session if t.session in jobs else (next(iter(jobs)) if t.session is None and len(jobs) == 1 and
                                               all(r.get("job_id") in jobs for r in rows) else None)
    if job is None:
        return None
    return t, sorted((r for r in rows if r.get("job_id") == job), key=lambda r: r.get("rank") or 0)


def job_endpoints(first: SshTarget | None, rows: list[dict[str, Any]]) -> list[Endpoint]:
    """Every rank of the job, in rank order, from the rows of its ranks on one node
    (`first`: the ssh target they came from; None: this machine). The other nodes are
    named by the ranks themselves (each puts its node in the job's store; `nodes` in the
    rows) and reached with one ssh connection per node, as the same user and port."""
    job = rows[0]["job_id"]
    world = max(r.get("world_size") or 1 for r in rows)
    groups: list[tuple[SshTarget | None, list[dict[str, Any]]]] = [(first, rows)]
    nodes: dict[int, str] = next((r["nodes"] for r in rows if r.get("nodes")), {})
    for node in sorted(set(nodes.values()) - {r["host"] for r in rows}):
        # Node names come from the job's store, which anyone who reaches it can write.
        if not host_name_ok(node):
            raise TargetError(f"a rank of job {job} names its node {node!r}, which is not a host name; refusing "
                              "to pass it to ssh (set STEPDBG_NODE on that node)")
        there = SshTarget(first.user if first else None, node, first.port if first else None, job)
        groups.append((there, [r for r in remote_listing(there, with_token=True) if r.get("job_id") == job]))
    owner: dict[int, tuple[SshTarget | None, dict[str, Any]]] = {}
    for t, rs in groups:
        for r in rs:
            owner.setdefault(r["rank"], (t, r))
    missing = [r for r in range(world) if r not in owner]
    if missing:
        seen = ", ".join(sorted({r["host"] for _, rs in groups for r in rs}))
        raise TargetError(f"job {job} has {world} ranks; {ranks_words(missing)} {'was' if len(missing) == 1 else 'were'} not found (searched {seen}). Each rank "
                          "names its node in the job's store once its process group exists; set STEPDBG_NODE where "
                          "the hostname is not what ssh reaches")
    found: dict[int, Endpoint] = {}
    try:
        for t, rs in groups:
            mine = [r for r in rs if owner[r["rank"]][1] is r]
            eps = _forward(t, mine) if t is not None else [Endpoint(_where(r), r["token"]) for r in mine]
            found.update({r["rank"]: ep for r, ep in zip(mine, eps, strict=True)})
    except BaseException:
        for ep in found.values():
            if ep.close is not None:
                ep.close()
        raise
    return [found[r] for r in range(world)]


def _where(row: dict[str, Any]) -> Any:
    """A session row's Unix socket (every session has one; older ones named it address), by
    its short alias where its path is too long for sshd to connect to."""
    return row.get("alias") or row.get("local") or row.get("address")


def _forward(t: SshTarget, rows: list[dict[str, Any]]) -> list[Endpoint]:
    if not rows:
        return []
    # 0700; ssh binds the forwarded sockets itself, so under a folder short enough for a
    # socket's address (a deep TMPDIR falls back to /tmp, still a private folder of ours)
    deep = len(os.fsencode(tempfile.gettempdir())) > SUN_PATH_MAX - 40
    local_dir = tempfile.mkdtemp(prefix="stepdbg-ssh-", dir="/tmp" if deep and os.path.isdir("/tmp") else None)
    for r in rows:
        if not isinstance(_where(r), str) or not _SOCKET.fullmatch(_where(r)):
            shutil.rmtree(local_dir, ignore_errors=True)
            raise TargetError(f"{t.host} named the socket {_where(r)!r}, which is not a socket path")
    locals_ = [os.path.join(local_dir, f"s{i}.sock") for i in range(len(rows))]
    forwards = [a for local, r in zip(locals_, rows, strict=True) for a in ("-L", f"{local}:{_where(r)}")]
    proc = subprocess.Popen(
        [*_ssh(t), "-N", "-o", "ExitOnForwardFailure=yes", *forwards, "--", t.dest],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    closed = []

    def close() -> None:
        if closed:
            return
        closed.append(True)
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        shutil.rmtree(local_dir, ignore_errors=True)

    deadline = time.monotonic() + SSH_TIMEOUT
    while not all(os.path.exists(p) for p in locals_):
        if proc.poll() is not None:
            stderr = proc.stderr.read(65_536) if proc.stderr else ""  # (ssh's own words: its last line is said)
            close()
            raise TargetError(_explain(t, proc.returncode, stderr))
        if time.monotonic() > deadline:
            close()
            raise TargetError(f"the ssh tunnel to {t.host} did not open in {SSH_TIMEOUT:g}s")
        time.sleep(0.05)
    # The last client to close takes the tunnel down.
    return [Endpoint(local, r["token"], close if i == len(rows) - 1 else None)
            for i, (local, r) in enumerate(zip(locals_, rows, strict=True))]
