"""A request the job's server has taken is answered before the job's end closes the
connection. CI's red (test_attach): `c.cont()` on a 3-step job raised "the connection to
the job closed": the cont let the job run to its end while the client's worker was between
resuming the job and putting the answer, and the ending job closed the connection first."""

from __future__ import annotations

import threading
from typing import Any

from conftest import WAIT

from stepdbg import client


def test_a_request_taken_before_the_end_is_answered_before_the_connection_closes(
        session_factory, private_runtime_dir, monkeypatch):
    from stepdbg.agent.serve import handlers
    from stepdbg.agent.serve.server import serve

    s = session_factory("nan")
    server = serve(s, announce=False)
    taken, plain = threading.Event(), handlers.Handlers.op_pause

    def op_pause(self: handlers.Handlers) -> None:  # the worker still answering as the job ends
        taken.set()
        server._stopped.wait(WAIT)
        return plain(self)

    monkeypatch.setattr(handlers.Handlers, "op_pause", op_pause)
    answers: list[object] = []
    with client.connect(server.info.id) as c:
        asking = threading.Thread(target=lambda: answers.append(_answer(c)))
        asking.start()
        assert taken.wait(WAIT)
        s.stop()
        asking.join(WAIT)
    assert answers == [None]


def _answer(c: Any) -> object:
    try:
        return c.call("pause", timeout=WAIT)
    except ConnectionError as e:
        return e
