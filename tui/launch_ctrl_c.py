"""The terminal while stepdbg shows a TUI (launch.py): its Ctrl-C while a job is launched,
and the keys typed before a TUI takes it."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
from typing import Any, TextIO


class CtrlC:
    """The terminal's Ctrl-C while stepdbg launches a job, as a SIGINT handler. The job has
    a session of its own, so the terminal's Ctrl-C reaches only this process: it is passed
    on to the job's process group, where its own handling runs as under plain python (which
    ends it, 130), and stepdbg waits for the job. Pressed before the TUI has the terminal
    (raw, where Ctrl-C is a key), it also closes the TUI that was coming: it went up over an
    interrupted job, or stepdbg stopped in its start with a traceback and the job ran on."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[Any] | None = None
        self.pressed = threading.Event()
        self.app: Any = None  # the TUI once made, and the loop it runs in
        self.loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, n: int, frame: Any) -> None:
        if self.child is None:
            raise KeyboardInterrupt  # no job yet: stepdbg ends, as plain python would
        with contextlib.suppress(OSError):
            os.killpg(self.child.pid, signal.SIGINT)
        self.pressed.set()
        self.close_app()

    def showing(self, app: Any) -> None:
        """`app` is made (in the running loop): a Ctrl-C already pressed closes it at once."""
        self.app, self.loop = app, asyncio.get_running_loop()
        if self.pressed.is_set():
            self.close_app()

    def close_app(self) -> None:
        if self.app is not None and self.loop is not None:
            with contextlib.suppress(RuntimeError):  # (the loop closed: the TUI is gone already)
                self.loop.call_soon_threadsafe(self.app.exit, "ctrl-c")


def wait_through_ctrl_c(child: subprocess.Popen[Any]) -> int:
    """Wait for the job. Ctrl-C at the terminal goes on to the job (CtrlC): stepdbg waits
    while it runs its own handling and writes its report's end, and keeps relaying its
    output, instead of dying first with a traceback."""
    return child.wait()


def drop_typed(stream: TextIO | None = None) -> int:
    """The keys typed at the terminal before a TUI takes it, dropped; how many (bytes). Typed
    while the job started, or while the launcher relayed its output, they waited in the
    terminal (a line not ended by Enter) and acted in the TUI that opened next as its keys
    (a `c` continued the job, a `q` asked to quit: the closing walk's leftovers). Said on
    stderr, which the terminal shows once the TUI is gone."""
    stream = sys.stdin if stream is None else stream
    try:
        fd = stream.fileno()
        if not os.isatty(fd):
            return 0
        cooked = termios.tcgetattr(fd)
    except (OSError, ValueError, termios.error):
        return 0
    uncooked = list(cooked)
    uncooked[3] &= ~termios.ICANON  # (a line not ended counts only once it is not a line)
    try:
        termios.tcsetattr(fd, termios.TCSANOW, uncooked)
        typed = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        termios.tcflush(fd, termios.TCIFLUSH)
    except (OSError, termios.error):
        typed = 0
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(fd, termios.TCSANOW, cooked)
    if typed:
        print(f"stepdbg: {typed} key{'s' if typed != 1 else ''} typed before the TUI opened were dropped "
              "(they would have acted in it)", file=sys.stderr, flush=True)
    return typed
