"""Where sessions announce themselves: a per-user directory of session files.

Each agent writes ``<dir>/<id>.json`` (mode 0600) with its pid, host, argv, address,
token and start time, and removes it on exit. The directory is ``$XDG_RUNTIME_DIR/
stepdbg`` or ``/tmp/stepdbg-<uid>``, mode 0700, and must belong to the user: file
permissions are what keep other local users away from the token and the socket.
Standard library only (the front end uses it too).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import socket
import stat
import tempfile
from dataclasses import dataclass
from typing import Any

from . import files
from .address import SUN_PATH_MAX


def node_name() -> str:
    """This machine's name as other machines reach it over ssh: STEPDBG_NODE, else the hostname."""
    return os.environ.get("STEPDBG_NODE") or socket.gethostname()


def runtime_dir() -> str:
    base = os.environ.get("STEPDBG_RUNTIME_DIR")
    if base:
        return base
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return os.path.join(xdg, "stepdbg")
    return os.path.join(tempfile.gettempdir(), f"stepdbg-{os.getuid()}")


def ensure_private_dir(path: str) -> str:
    """Create `path` 0700, or check an existing one is ours and private. One open to other
    users is refused in the words `stepdbg ls` and the launcher say (PermissionError), never
    made private behind the user's back: a job started with STEPDBG_AUTOSTART changed the
    mode of the user's own folder without a word."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(_not_ours(path, st))
    return path


def trusted_dir() -> str | None:
    """The runtime directory if it exists and can be trusted (a real directory, owned by
    this user, mode 0700); None if it does not exist; PermissionError otherwise. Another
    local user may create /tmp/stepdbg-UID first, or plant files in a shared one."""
    d = runtime_dir()
    try:
        st = os.lstat(d)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(_not_ours(d, st))
    return d


def _not_ours(path: str, st: os.stat_result) -> str:
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():  # ours, open to others: what to do (not "another user")
        named = f"STEPDBG_RUNTIME_DIR={path}" if os.environ.get("STEPDBG_RUNTIME_DIR") else f"the runtime directory {path}"
        return (f"{named} is open to other users (mode {stat.S_IMODE(st.st_mode):04o}); the job's socket and token "
                f"must be private: `chmod 700 {path}`, or set STEPDBG_RUNTIME_DIR to another folder")
    what = "a link" if stat.S_ISLNK(st.st_mode) else ("not a directory" if not stat.S_ISDIR(st.st_mode) else
                                                       f"owned by uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}")
    return (f"{path} is not a private directory of yours ({what}): another user may have made it; "
            "stepdbg will not use it. Set STEPDBG_RUNTIME_DIR to a directory of your own, "
            "e.g. STEPDBG_RUNTIME_DIR=~/.stepdbg-run")


def _own_file(path: str) -> bool:
    """A regular file of this user that nobody else can read or write (not a link)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


@dataclass
class SessionInfo:
    """What a session file says."""

    id: str
    pid: int
    host: str
    argv: list[str]
    address: str  # a socket path, or host:port for TCP (--listen)
    token: str
    started: float
    local: str | None = None  # the Unix socket every session has: the owner's way in
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    job_id: str | None = None
    path: str = ""

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    @classmethod
    def from_json(cls, data: Any) -> SessionInfo:
        """A session as a file or a remote `ls --json` row says it; ValueError naming the
        first field that is not what a session writes (files and hosts can lie)."""
        if not isinstance(data, dict):
            raise ValueError(f"a session is an object, not {type(data).__name__}")
        for name, kinds, required in _FIELDS:
            v = data.get(name)
            if v is None and not required:
                continue
            if not isinstance(v, kinds) or isinstance(v, bool):
                raise ValueError(f"{name} is {v!r}")
        if not 0 < data["pid"] < 2**31 or not all(isinstance(a, str) for a in data["argv"]):
            raise ValueError(f"pid {data['pid']!r} or argv {data['argv']!r} is not a process's")
        if not _file_name(data["id"]):  # (remove() names its file by it)
            raise ValueError(f"id {data['id']!r} is no file name")
        for name in ("address", "local"):
            if data.get(name) is not None and not _path_like(data[name]):
                raise ValueError(f"{name} {data[name]!r} is no path or address (a NUL, or a character no file name has)")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "path"})

    @property
    def reach(self) -> str:
        """Where a client on this machine connects: the Unix socket, else the address."""
        return self.local or self.address

    def public(self, with_token: bool = False) -> dict[str, Any]:
        d = {k: v for k, v in self.__dict__.items() if k not in ("token", "path")}
        if with_token:
            d["token"] = self.token
        return d


_FIELDS = [("id", str, True), ("pid", int, True), ("host", str, True), ("argv", list, True),
           ("address", str, True), ("token", str, True), ("started", (int, float), True),
           ("rank", int, False), ("local_rank", int, False), ("world_size", int, False),
           ("job_id", str, False), ("local", str, False)]


def _path_like(text: str) -> bool:
    """What a system call can take: no NUL, and encodable (a lone surrogate is not)."""
    try:
        return b"\0" not in os.fsencode(text)
    except ValueError:
        return False


def _file_name(text: str) -> bool:
    """A name a file in the runtime directory can have: no folder, no dot first, no NUL."""
    return _path_like(text) and 0 < len(text) <= 200 and os.path.basename(text) == text and not text.startswith(".")


def write(info: SessionInfo) -> str:
    d = ensure_private_dir(runtime_dir())
    path = os.path.join(d, f"{info.id}.json")
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info.public(with_token=True), f)
    os.replace(path + ".tmp", path)
    info.path = path
    return path


def remove(info: SessionInfo) -> None:
    """Remove a session's own files: its session file and its socket, and only as stepdbg
    names them inside the runtime directory (never a path read from a file)."""
    d = runtime_dir()
    for name in (f"{info.id}.json", f"{info.pid}.sock"):
        if not _file_name(name):
            continue
        with contextlib.suppress(OSError):  # (gone already; a folder of that name is left)
            os.unlink(os.path.join(d, name))


def listing(clean: bool = True, gone: list[SessionInfo] | None = None) -> list[SessionInfo]:
    """The live sessions of this user on this host; files of dead processes are removed
    (and put in `gone`: a job killed -9 left them, which an attach says). Only files this
    user owns and nobody else can read count; PermissionError when the runtime directory
    itself cannot be trusted."""
    d = trusted_dir()
    out: list[SessionInfo] = []
    if d is None:
        return out
    for name in sorted(os.listdir(d)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(d, name)
        if not _own_file(path):
            continue
        try:  # (capped: a session file is a few hundred bytes, at most its argv's size)
            info = SessionInfo.from_json(json.loads(files.read_capped(path, files.SESSION_LIMIT)))
        except (OSError, ValueError, RecursionError):
            continue
        info.path = path
        if info.alive():
            out.append(info)
        elif clean and name == f"{info.id}.json" and info.host == node_name():  # (another host's pid means
            remove(info)  # nothing here: a runtime directory in a shared home; a file naming another's id)
            if gone is not None:
                gone.append(info)
    return out


def sweep() -> None:
    """The files of this user's sessions whose process is gone, removed: for a launcher
    once its job ended (a rank torchrun SIGKILLed after its grace, a job killed -9 or
    os._exit'ed, which leave theirs). Never raises."""
    with contextlib.suppress(OSError):  # (PermissionError: an untrusted directory is left as it is)
        listing()


def short_alias(path: str) -> str | None:
    """A short name for the Unix socket `path` when `path` is too long for a socket's
    address: a link in a private folder of this user's under /tmp. sshd forwards to a
    socket by its path itself (`ssh -L local:PATH`), so a remote job in a deep runtime
    directory is reached through this. None when `path` is short, or when no private
    folder can be had (another user made it first), or when `path` is no path a link can
    hold (a NUL or a lone surrogate in a session file: ValueError)."""
    try:
        if len(os.fsencode(path)) < SUN_PATH_MAX:
            return None
    except ValueError:
        return None
    base = "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()
    folder = os.path.join(base, f"stepdbg-{os.getuid()}-links")
    link = os.path.join(folder, hashlib.sha256(os.fsencode(path)).hexdigest()[:16])
    if len(os.fsencode(link)) >= SUN_PATH_MAX:
        return None
    try:
        ensure_private_dir(folder)
        for entry in itertools.islice(os.scandir(folder), 1000):  # links to sockets gone
            if not os.path.exists(entry.path):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
        new = f"{link}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(new)
        os.symlink(path, new)
        os.replace(new, link)
    except (OSError, ValueError):
        return None
    return link
