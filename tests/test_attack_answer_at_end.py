"""Attacks on the server's end that waits for the requests it took (6437083): a client that
asks again while the end waits must not lose the answer it waits for, nor the exited event.

Before: the connection's reader, seeing the server stopped at its next request, closed the
connection itself while the end still waited for the first request: that answer and the
`exited` event were lost ("the connection to the job closed", CI's red again)."""

from __future__ import annotations

import threading
from typing import Any

from conftest import WAIT

from stepdbg import client


def _answer(c: Any, op: str) -> object:
    try:
        return c.call(op, timeout=WAIT)
    except Exception as e:  # noqa: BLE001 - what the client was told, whatever it is
        return e


def test_a_request_sent_while_the_end_waits_cuts_nothing(session_factory, private_runtime_dir, monkeypatch):
    from stepdbg.agent.serve import handlers
    from stepdbg.agent.serve.server import serve

    s = session_factory("nan")
    server = serve(s, announce=False)
    taken, release, plain = threading.Event(), threading.Event(), handlers.Handlers.op_pause

    def op_pause(self: handlers.Handlers) -> None:  # the worker still answering as the job ends
        taken.set()
        release.wait(WAIT)
        return plain(self)

    monkeypatch.setattr(handlers.Handlers, "op_pause", op_pause)
    first: list[object] = []
    second: list[object] = []
    with client.connect(server.info.id) as c:
        asking = threading.Thread(target=lambda: first.append(_answer(c, "pause")))
        asking.start()
        assert taken.wait(WAIT)
        stopping = threading.Thread(target=s.stop)
        stopping.start()
        assert server._stopped.wait(WAIT)
        again = threading.Thread(target=lambda: second.append(_answer(c, "history")))
        again.start()
        again.join(WAIT)  # answered (or cut) before the first is let go
        release.set()
        asking.join(WAIT)
        stopping.join(WAIT)
        exited = c.wait_exited(WAIT)
    assert first == [None]
    assert exited is not None and "lost" not in exited, exited
    assert len(second) == 1 and isinstance(second[0], client.ClientError), second
    assert "the job is ending" in str(second[0])


def test_the_exited_event_keeps_time_of_its_own_after_a_request_never_answered(
        session_factory, private_runtime_dir, monkeypatch):
    """A request that is not answered within the grace (it waits for a training thread that
    is ending) took all of it; the exited event, queued behind what a slow reader had not
    read yet, then had none left and was dropped: the client read 'the connection closed'."""
    from stepdbg.agent.serve import handlers
    from stepdbg.agent.serve.server import serve
    from stepdbg.wire import protocol

    s = session_factory("nan")
    server = serve(s, announce=False)
    taken, release, plain = threading.Event(), threading.Event(), handlers.Handlers.op_pause

    def op_pause(self: handlers.Handlers) -> None:  # never answered within the end's grace
        taken.set()
        release.wait(WAIT)
        return plain(self)

    monkeypatch.setattr(handlers.Handlers, "op_pause", op_pause)
    reading = threading.Event()
    broadcast = server.broadcast

    def exited_then_read(message: dict[str, Any]) -> None:
        broadcast(message)
        if message.get("event") == "exited":
            reading.set()  # the client reads again only once the end has said it

    monkeypatch.setattr(server, "broadcast", exited_then_read)
    with client.connect(server.info.id) as c:
        heard = c._on_event
        c._on_event = lambda msg: (reading.wait(WAIT), heard(msg))  # a slow reader: busy with the first
        threading.Thread(target=lambda: _answer(c, "pause"), daemon=True).start()
        assert taken.wait(WAIT)
        for _ in range(8):  # more than the sockets hold: the rest waits in the job's outbox
            server.broadcast(protocol.event("output", [{"stream": "stdout", "lines": ["x" * 1000] * 1000}]))
        s.stop()
        release.set()
        exited = c.wait_exited(WAIT)
    assert exited is not None and "lost" not in exited, exited
