"""The hidden folders of bundle saves that never finished, and their sweep.

A save writes into ``.<name>.partial-<host>-<pid>-<random>`` beside its bundle and renames
it when whole (bundle.py). Any failure Python sees removes it; a SIGKILL, a power cut or
the OOM killer does not. The next save in that folder removes those of this host whose
process is gone and that belong to this user: never a link, never another host's (its
pid means nothing here), never one whose process still runs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
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
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.name)
    return removed
