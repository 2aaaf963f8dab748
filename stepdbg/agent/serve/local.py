"""The ops in process: the console at the job's own terminal (no front end attached) calls
the same ops as a client, with the same argument checks, through the same handlers, on
the paused training thread, without a socket. Its methods are the client's
(wire.ops.OpCalls), so one console serves both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stepdbg.agent.serve.handlers import Handlers
from stepdbg.wire import protocol
from stepdbg.wire.ops import SCHEMAS, OpCalls

if TYPE_CHECKING:
    from stepdbg.agent.session import Session


class LocalError(RuntimeError):
    """An op refused in process; as the client's ClientError: a code and a message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Peer:
    then = "stay"
    local = True  # (the end's `by here`: this terminal's console alone says it)


class LocalCalls(OpCalls):
    """A Session's ops as the client's methods, answered in this process."""

    remote = False  # the console is on the job's own terminal: Ctrl-C reaches the job itself

    def __init__(self, session: Session) -> None:
        self._dispatch = protocol.Dispatcher(Handlers(session, _Peer()), SCHEMAS)

    def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:
        if op == "end":  # (the console's own q was said 'as asked by a front end (end, or q then e)')
            args = {**args, "by": "here"}
        r = self._dispatch.handle(protocol.request(0, op, **args))
        if not r["ok"]:
            raise LocalError(r["error"]["code"], r["error"]["message"])
        return r["result"]
