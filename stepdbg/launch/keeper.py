"""The job's output keeper: a small process between a TUI-launched job's stdout/stderr and
its launcher, so that the job outlives the launcher.

`stepdbg python train.py` at a terminal starts the job in a session of its own (the
closing terminal's SIGHUP and signals to the launcher's process group do not reach it)
with its stdout and stderr going into two pipes whose read ends this process holds; it
runs in a session of its own too. While the launcher lives, every byte is passed on at
once, stream by stream, to this process's fd 1 and 2, which the launcher reads into its
Log panel and terminal. When the launcher is gone (SIGKILL, SIGTERM, SIGHUP: its end of
this process's stdin closes, or a write to it fails), what it had not read yet and all
that follows go to ``output_path(pid)``, 0600 in a 0700 folder under the user's state
directory (it outlives a logout, unlike the session directory):
the job never writes into a pipe without a reader (that killed it at its next print)
and never waits on a dead one. At CAP bytes the file becomes ``.1`` (the one before is
dropped): the newest output is kept and the disk is not filled. A file that cannot be
written drops that output, never the job. The keeper ends when the job and everything
it started have closed their output.

Standard library only, run by path with ``-I -S`` (no site packages: no .pth hook gives it
an agent): ``python -I -S keeper.py OUT_FD ERR_FD PATH``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import struct
import sys
import termios

CAP = 64 << 20  # bytes in one output file; the one before is kept as PATH.1
CHUNK = 65536
F_GETPIPE_SZ = 1032


def output_path(pid: int) -> str:
    """Where the output of job `pid` goes once its launcher is gone:
    ``$XDG_STATE_HOME/stepdbg/output/HOST-PID.out`` (``~/.local/state`` by default; the host
    in the name, for a home shared by several machines)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    host = socket.gethostname().replace(os.sep, "_") or "localhost"
    return os.path.join(base, "stepdbg", "output", f"{host}-{pid}.out")


class Sink:
    """The output file once the launcher is gone: opened on first use, rotated at `cap`.
    Every failure (no space, no home) drops the bytes at hand and never raises."""

    def __init__(self, path: str, cap: int = CAP) -> None:
        self.path = path
        self.cap = cap
        self.fd: int | None = None
        self.size = 0

    def open(self) -> None:
        d = os.path.dirname(self.path)
        with contextlib.suppress(OSError):
            os.makedirs(os.path.dirname(d), mode=0o700, exist_ok=True)  # (stepdbg/, as the REPL's history makes it)
            os.makedirs(d, mode=0o700, exist_ok=True)
        with contextlib.suppress(OSError):  # an earlier process with this pid, or the last rotation
            if os.path.lexists(self.path):
                os.replace(self.path, self.path + ".1")
        try:
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            self.fd = None
        self.size = 0

    def write(self, data: bytes) -> None:
        if self.fd is not None and self.size + len(data) > self.cap and self.size:
            os.close(self.fd)
            self.fd = None
        if self.fd is None:
            self.open()
            if self.fd is None:
                return
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except InterruptedError:
                continue
            except OSError:
                return  # (no space): this much is dropped; the next write tries again
            view = view[n:]
            self.size += n


class Relay:
    """One of the job's streams: read from `src`, passed on to `dst` while the launcher
    reads it. The last bytes written are kept: on the launcher's end, those it had not
    read (FIONREAD on the pipe) are the first in the file."""

    def __init__(self, src: int, dst: int) -> None:
        self.src = src
        self.dst = dst
        try:
            self.keep = fcntl.fcntl(dst, F_GETPIPE_SZ)
        except OSError:
            self.keep = 0  # not a pipe: what was written is written
        self.tail = bytearray()

    def unread(self) -> bytes:
        if not self.keep or not self.tail:
            return b""
        try:
            n = struct.unpack("i", fcntl.ioctl(self.dst, termios.FIONREAD, b"\0\0\0\0"))[0]
        except OSError:
            return b""
        return bytes(self.tail[len(self.tail) - min(n, len(self.tail)):]) if n > 0 else b""

    def send(self, data: bytes) -> bytes:
        """Write `data` to the launcher; what could not be written (it is gone), or b""."""
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.dst, view)
            except InterruptedError:
                continue
            except OSError:
                return bytes(view)
            if self.keep:
                self.tail += view[:n]
                if len(self.tail) > 2 * self.keep:
                    del self.tail[:len(self.tail) - self.keep]
            view = view[n:]
        return b""


def keep(out_fd: int, err_fd: int, path: str, launcher: int | None = 0, cap: int = CAP) -> None:
    """Pass the job's output on until both of its streams close; the launcher's end (EOF on
    the pipe `launcher`, our stdin) or a failed write moves everything, from the first
    unread byte, to `path`."""
    Keeper(out_fd, err_fd, path, launcher, cap).run()


class Keeper:
    def __init__(self, out_fd: int, err_fd: int, path: str, launcher: int | None, cap: int) -> None:
        self.relays = {out_fd: Relay(out_fd, 1), err_fd: Relay(err_fd, 2)}
        self.path, self.cap, self.launcher = path, cap, launcher
        self.sink: Sink | None = None
        self.poll = select.poll()
        for fd in (out_fd, err_fd) if launcher is None else (out_fd, err_fd, launcher):
            self.poll.register(fd, select.POLLIN)

    def run(self) -> None:
        streams = len(self.relays)
        while streams:
            for fd, _ in self.poll.poll():
                if fd == self.launcher:
                    self._launcher_said(fd)
                elif not self._pass(fd):
                    streams -= 1

    def orphaned(self, left: bytes = b"") -> None:
        """The launcher is gone: its unread bytes, then `left`, then the rest go to the file."""
        self.sink = Sink(self.path, self.cap)
        self.sink.write(b"".join(r.unread() for r in self.relays.values()) + left)

    def _launcher_said(self, fd: int) -> None:
        with contextlib.suppress(OSError):
            if os.read(fd, CHUNK):
                return  # (the launcher writes nothing; EOF is its end)
        self.poll.unregister(fd)
        if self.sink is None:
            self.orphaned()

    def _pass(self, fd: int) -> bool:
        """One read of the job's stream `fd`, passed on; False at its end."""
        try:
            data = os.read(fd, CHUNK)
        except InterruptedError:
            return True
        except OSError:
            data = b""
        if not data:
            self.poll.unregister(fd)
            os.close(fd)
            return False
        if self.sink is not None:
            self.sink.write(data)
        elif left := self.relays[fd].send(data):
            self.orphaned(left)
        return True


def main(argv: list[str]) -> int:
    try:
        out_fd, err_fd, path = int(argv[0]), int(argv[1]), argv[2]
    except (IndexError, ValueError):
        print("usage: python -I -S keeper.py OUT_FD ERR_FD PATH", file=sys.stderr)
        return 2
    keep(out_fd, err_fd, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
