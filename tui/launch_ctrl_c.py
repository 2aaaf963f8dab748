"""The terminal's Ctrl-C while stepdbg launches a job (launch.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from typing import Any


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
