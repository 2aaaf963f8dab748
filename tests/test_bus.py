"""The agent's stderr lines (Bus.say) stay whole when threads say things at once."""

from __future__ import annotations

import sys
import threading
import time

from stepdbg.agent.bus import Bus


class _ScriptsTee:
    """A stderr a script might install (a tee to its log): Python code, so another thread
    can run between two of its writes."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        time.sleep(0)  # (lets the other thread run, as a tee's own I/O would)
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_two_threads_saying_at_once_write_whole_lines(monkeypatch):
    tee = _ScriptsTee()
    monkeypatch.setattr(sys, "stderr", tee)
    bus = Bus(None, quiet=False, step=lambda: 0)
    go = threading.Barrier(2)

    def say_many(who: str) -> None:
        go.wait()
        for i in range(200):
            bus.say(f"dropped a client: {who} {i}")

    threads = [threading.Thread(target=say_many, args=(w,)) for w in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = "".join(tee.parts).splitlines()
    assert len(lines) == 400
    assert all(line.startswith("stepdbg: dropped a client: ") and line.count("dropped") == 1 for line in lines)
