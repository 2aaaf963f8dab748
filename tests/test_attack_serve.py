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
    """The reader answers `interrupt` at once; a `status` it answers itself waited for the
    client's pace (BURST, then RATE a second), and the interrupt behind it waited too: 60
    statuses then an interrupt were answered 1.3 s late, after every status (before 45d5f0a:
    first). A status that would wait now goes to the worker, and the interrupt overtakes
    the paced ones."""
    job = start_job(script_args=("--steps", "100000", "--sleep", "0.001"))
    info = job.info()
    s = _hello(info)
    statuses = [protocol.request(i, "status") for i in range(1, 61)]
    s.sendall(b"".join(protocol.encode(m) for m in [*statuses, protocol.request(999, "interrupt")]))
    got = _answers(s, 60, time.monotonic() + WAIT)  # (60: the last status, paced)
    if not any(m.get("id") == 999 for _, m in got):
        got += _answers(s, 999, time.monotonic() + WAIT)
    s.close()
    job.proc.kill()
    order = [m.get("id") for _, m in got if m.get("type") == "response"]
    assert order.index(999) < order.index(60), order


@pytest.mark.slow
def test_clients_that_do_not_read_at_the_end_are_not_news(start_job):
    """Three clients pipeline answers they never read; the job ends as asked. Each had
    held the end 1 s in turn, and closing the socket under a sender still writing said
    'dropped a client: the connection failed: [Errno 9] Bad file descriptor'."""
    from stepdbg import client

    job = start_job(script_args=("--steps", "100000", "--sleep", "0.002"))
    info = job.info()
    with client.connect() as c:
        while c.status()["step"] < 400:  # (a history long enough that its answers fill a socket)
            c.events.get(timeout=WAIT)
        silent = [_hello(info) for _ in range(3)]
        for s in silent:
            s.sendall(b"".join(protocol.encode(protocol.request(i, "history", last=10_000)) for i in range(1, 31)))
        c.close(then="end")
    code, _, err = job.finish()
    for s in silent:
        s.close()
    assert code == 3, err
    assert "dropped a client" not in err and "Traceback" not in err, err
