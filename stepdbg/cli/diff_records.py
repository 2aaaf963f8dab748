"""`stepdbg diff`'s kept records: a run's record kept in a folder (--keep-records DIR), and
a kept record given as A or B in place of a command line, compared with no run.

A record is data a job wrote (its script may have written anything there) and a kept one
is a file anyone could have handed over: only a regular file is read, within a size and
a count cap, with the record's own checks (stepdbg/wire/step_diff.read_record: types
checked, its words' control characters escaped before they are printed). A record is
kept by writing a temporary file in the folder (opened once, before the runs: a folder
swapped for a link meanwhile changes nothing) and linking it to its name, never over a
file there; signals wait while it is written, and a write that fails leaves nothing and
says why without ending the diff.
"""

from __future__ import annotations

import os
import secrets
import signal
import stat
from dataclasses import dataclass

from ..wire.step_diff import Record, RecordError, read_record
from .common import UsageError
from .diff_jobs import SIGNALS

SUFFIX = ".jsonl"
MAX_RECORD_BYTES = 512 << 20  # a kept record read as A or B (100 steps of 4,096 module calls: about 200 MB)
MAX_ENTRIES = 2_000_000  # its fingerprints (each read costs a few hundred bytes of memory)
COPY_CHUNK = 1 << 20


class RecordUnusable(Exception):
    """A kept record that cannot be compared: one line, exit code 2."""


def names_a_record(line: str) -> bool:
    """An argument that is a path ending in .jsonl names a kept record, not a command: one
    word, or a path that is there ("my runs/A.jsonl")."""
    path = line.strip()
    return path.endswith(SUFFIX) and (os.path.lexists(path) or not any(c.isspace() for c in path))


def looks_like_a_record(line: str) -> bool:
    """A command line that is one file holding JSON: a record misnamed, never run as a script."""
    path = line.strip()
    try:
        with open(path, "rb") as f:
            return stat.S_ISREG(os.fstat(f.fileno()).st_mode) and f.read(64).lstrip().startswith(b"{")
    except OSError:
        return False


def read_kept(label: str, line: str) -> Record:
    """The record `line` names (A's or B's), or RecordUnusable saying why not."""
    path = line.strip()
    try:
        st = os.stat(path)
    except OSError as e:
        raise RecordUnusable(f"{label}: no record at {path} ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise RecordUnusable(f"{label}: {path} is not a file: a record is a file --keep-records wrote")
    if st.st_size > MAX_RECORD_BYTES:
        raise RecordUnusable(f"{label}: {path} is {st.st_size:,} bytes, over the {MAX_RECORD_BYTES:,} a record "
                             "may have")
    try:
        return read_record(path, max_bytes=max(st.st_size, 1), max_entries=MAX_ENTRIES)
    except RecordError as e:
        raise RecordUnusable(f"{label}: {path} is not a record stepdbg diff wrote ({e})") from None
    except MemoryError:
        raise RecordUnusable(f"{label}: {path} is too large to read in this process's memory") from None
    except OSError as e:
        raise RecordUnusable(f"{label}: {path} cannot be read ({e.strerror or e})") from None


@dataclass
class Keeper:
    """The folder the runs' records are kept in, opened once."""

    path: str
    fd: int

    def close(self) -> None:
        os.close(self.fd)


def keep_folder(folder: str, labels: list[str]) -> Keeper:
    """The folder the runs' records are kept in (made 0700 if missing), checked before any
    run starts: a file there of a record's name is never overwritten."""
    if not folder.strip():
        raise UsageError("--keep-records needs a folder, not an empty name")
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise UsageError(f"--keep-records: {folder} is not a folder")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise UsageError(f"--keep-records: cannot make {folder} ({e.strerror or e})") from None
    keeper = Keeper(folder, fd)
    there = [label + SUFFIX for label in labels if _there(keeper, label + SUFFIX)]
    if there or not os.access(folder, os.W_OK | os.X_OK):
        keeper.close()
        if there:
            raise UsageError(f"--keep-records: {os.path.join(folder, there[0])} is there already (a record is "
                             "never overwritten): choose another folder or remove it")
        raise UsageError(f"--keep-records: {folder} is not writable")
    return keeper


def _there(keeper: Keeper, name: str) -> bool:
    try:
        os.stat(name, dir_fd=keeper.fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def keep(label: str, record: str, keeper: Keeper) -> str:
    """A copy of the run's `record` as LABEL.jsonl in the folder; the line said on stderr."""
    final = os.path.join(keeper.path, label + SUFFIX)
    tmp = f".{label}.{secrets.token_hex(4)}.part"
    held = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # (a stop waits: nothing half-written stays)
    try:
        _copy(record, tmp, keeper.fd)
        os.link(tmp, label + SUFFIX, src_dir_fd=keeper.fd, dst_dir_fd=keeper.fd)  # (not over a file put there)
    except OSError as e:
        return f"{label}'s record was not kept ({e.strerror or e}): nothing of it is left in {keeper.path}"
    finally:
        try:
            os.unlink(tmp, dir_fd=keeper.fd)
        except OSError:
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return f"{label}'s record kept: {final} (compare it again with no run: stepdbg diff {final} ...)"


def _copy(record: str, tmp: str, dir_fd: int) -> None:
    with open(record, "rb") as src:
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        with os.fdopen(out, "wb") as dst:
            while chunk := src.read(COPY_CHUNK):
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
