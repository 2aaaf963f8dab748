"""Reading a file that a path names (a token, a session file, a report read back): only a
regular file, and only up to a size cap. ``/dev/zero`` never ends and a FIFO blocks until
someone writes: each is refused with an OSError whose strerror says why, so the callers'
``except OSError`` turns it into their one line. Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat

TOKEN_LIMIT = 4_096  # bytes of a token file (a token is 43 characters)
SESSION_LIMIT = 8 * 2**20  # bytes of a session file (its argv, at most ARG_MAX, is the longest part)
REPORT_LIMIT = 256 * 2**20  # bytes of a report read back (events only, no per-step lines)


def _open_regular(path: str) -> int:
    """A descriptor of `path`, opened without waiting (a FIFO's open would wait for a
    writer), or OSError when it is not a regular file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, socket or device)"
            raise OSError(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, f"it is {kind}", path)
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_capped(path: str, limit: int) -> bytes:
    """The whole of the regular file `path`, or OSError when it holds more than `limit`
    bytes (checked before reading, and again while reading: a file may grow)."""
    fd = _open_regular(path)
    try:
        if os.fstat(fd).st_size > limit:
            raise _too_large(path, limit)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise _too_large(path, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_head(path: str, n: int) -> bytes:
    """The first `n` bytes of the regular file `path` (a #! line), or OSError."""
    fd = _open_regular(path)
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)


def _too_large(path: str, limit: int) -> OSError:
    return OSError(errno.EFBIG, f"it is larger than {limit:,} bytes, the most read", path)
