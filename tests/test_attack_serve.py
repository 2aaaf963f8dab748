"""Attacks on the agent's server (45d5f0a: status answered by the reader, paced)."""

from __future__ import annotations

import socket
import time

import pytest
from conftest import WAIT

from stepdbg.wire import protocol, sessions
from stepdbg.wire.address import unix_name

pytestmark = pytest.mark.usefixtures("private_runtime_dir")


def _hello(info: sessions.SessionInfo) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with unix_name(info.address) as name:
        s.connect(name)
    s.sendall(protocol.encode(protocol.hello(info.token)))
    return s


def _answers(s: socket.socket, want: int, deadline: float) -> list[tuple[float, dict]]:
    dec, got = protocol.FrameDecoder(protocol.MAX_FRAME), []
    s.settimeout(1.0)
    while time.monotonic() < deadline:
        try:
            data = s.recv(1 << 20)
        except TimeoutError:
            continue
        if not data:
            break
        for m in dec.feed(data):
            got.append((time.monotonic(), m))
            if m.get("id") == want:
                return got
    raise AssertionError(f"no answer to {want}")


@pytest.mark.slow
def test_an_interrupt_after_pipelined_statuses_is_answered_at_once(start_job):
    """The reader answers `interrupt` at once; a `status` it answers itself waits for the
    client's pace (BURST, then RATE a second), and the interrupt behind it waited too: 60
    statuses then an interrupt were answered 1.3 s late (0.004 s before 45d5f0a)."""
    job = start_job(script_args=("--steps", "100000", "--sleep", "0.001"))
    info = job.info()
    s = _hello(info)
    statuses = [protocol.request(i, "status") for i in range(1, 61)]
    t0 = time.monotonic()
    s.sendall(b"".join(protocol.encode(m) for m in [*statuses, protocol.request(999, "interrupt")]))
    got = _answers(s, 999, time.monotonic() + WAIT)
    s.close()
    job.proc.kill()
    assert got[-1][0] - t0 < 0.5, f"the interrupt was answered {got[-1][0] - t0:.2f}s later"
