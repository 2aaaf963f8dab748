"""What an address names, decided in one place: a Unix socket (a path) or a TCP HOST:PORT
(``[::1]:5678`` for IPv6). The agent listens on them, the clients connect to them, the
CLI checks ``--listen`` with them. Standard library only."""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass

from .numbers import ascii_int

DEFAULT_HOST = "127.0.0.1"


@dataclass(frozen=True)
class Address:
    path: str | None = None  # a Unix socket
    host: str = ""
    port: int = 0

    @property
    def family(self) -> socket.AddressFamily:
        if self.path is not None:
            return socket.AF_UNIX
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET

    @property
    def sockaddr(self) -> str | tuple[str, int]:
        """What socket.connect/bind take."""
        return self.path if self.path is not None else (self.host, self.port)


SUN_PATH_MAX = 104  # bytes of a socket path every platform's sockaddr_un holds, with its NUL (Linux: 108)


@contextlib.contextmanager
def unix_name(path: str) -> Iterator[str]:
    """A name for the Unix socket `path` that bind() and connect() take, whatever its length.

    A sockaddr_un holds about 104 bytes, and a runtime directory can be deeper (a home on a
    network mount, a container's runtime directory, a test's temporary folder). A longer
    path is reached, on Linux, through a descriptor of its directory held while the block
    runs (``/proc/self/fd/N/NAME``: any depth); elsewhere, relative to the current
    directory when that is short enough; else ENAMETOOLONG names the path."""
    if len(os.fsencode(path)) < SUN_PATH_MAX:
        yield path
        return
    directory, name = os.path.split(os.path.abspath(path))
    if os.path.isdir("/proc/self/fd"):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_PATH", 0) | os.O_CLOEXEC)
        try:
            yield f"/proc/self/fd/{fd}/{name}"
        finally:
            os.close(fd)
        return
    relative = os.path.relpath(path)
    if len(os.fsencode(relative)) < SUN_PATH_MAX:
        yield relative
        return
    raise OSError(errno.ENAMETOOLONG, f"a socket path of {len(os.fsencode(path))} bytes (at most "
                                      f"{SUN_PATH_MAX - 1} here): set STEPDBG_RUNTIME_DIR to a shorter folder", path)


def is_socket_path(text: str) -> bool:
    return os.path.sep in text or text.endswith(".sock")


def split_hostport(text: str) -> tuple[str, str] | None:
    """HOST and PORT of 'HOST:PORT' or ':PORT' (a port of digits), else None."""
    host, sep, port = text.rpartition(":")
    if not sep or ascii_int(port) is None:
        return None
    return host.strip("[]"), port


def looks_like_hostport(text: str) -> bool:
    """A target naming a TCP address (a session id or a path does not)."""
    parts = split_hostport(text)
    return parts is not None and bool(parts[0]) and os.path.sep not in text


def parse(text: str, default_host: str = DEFAULT_HOST, listen: bool = True) -> Address:
    """A socket path or HOST:PORT to listen on (port 0: a free one) or, not `listen`, to
    connect to; ValueError says what was expected."""
    if is_socket_path(text):
        return Address(path=text)
    parts = split_hostport(text)
    if parts is None:
        raise ValueError(f"{text!r}: expected HOST:PORT or :PORT (e.g. 127.0.0.1:5678) or a socket path")
    host, port = parts
    least = 0 if listen else 1
    if not least <= int(port) <= 65535:
        raise ValueError(f"{text!r}: port {port} is not in {least}-65535{' (0 picks a free one)' if listen else ''}")
    return Address(host=host or default_host, port=int(port))
