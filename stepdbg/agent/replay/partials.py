"""The hidden folders of bundle saves that never finished, and their sweep.

A save writes into ``.<name>.partial-<host>-<pid>-<random>`` beside its bundle and renames
it when whole (bundle.py), holding an exclusive flock on the folder while it writes.
Any failure Python sees removes it; a SIGKILL, a power cut or the OOM killer does not.
The next save in that folder removes those of this host and user whose process is gone
and whose lock it can take at once: never a link, never another host's (its pid means
nothing here), never one a save still holds (a process in another PID namespace, a
container sharing the folder, looks gone to os.kill but holds its lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

_HOST = re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:64] or "host"
_NAME = re.compile(r"^\..+\.partial-(?P<host>[A-Za-z0-9._]+)-(?P<pid>\d{1,10})-[A-Za-z0-9_]+$")
SWEEP_LIMIT = 10_000  # entries of the folder looked at, at most (a save never waits on a huge folder)


def prefix(name: str) -> str:
    """The temporary folder's prefix for bundle `name` (tempfile adds the random part)."""
    return f".{name}.partial-{_HOST}-{os.getpid()}-"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):  # another user's process (or no such number): leave it
        return False
    return False


def sweep(parent: Path) -> list[str]:
    """Remove the unfinished saves in `parent` left by dead processes of this host and user;
    the names removed."""
    removed: list[str] = []
    try:
        entries = os.scandir(parent)
    except OSError:
        return removed
    with entries:
        for n, entry in enumerate(entries):
            if n >= SWEEP_LIMIT:
                break
            m = _NAME.match(entry.name)
            if m is None or m["host"] != _HOST or int(m["pid"]) == os.getpid() or not _gone(int(m["pid"])):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            with held(entry.path, wait=False) as free:
                if free:
                    shutil.rmtree(entry.path, ignore_errors=True)
            if free and not os.path.lexists(entry.path):
                removed.append(entry.name)
    return removed


@contextlib.contextmanager
def held(folder: str | os.PathLike[str], wait: bool = True) -> Iterator[bool]:
    """An exclusive flock on `folder` (never through a link) for the block: True when held;
    with `wait` False, False at once when a save holds it (or it cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
