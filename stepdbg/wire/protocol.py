"""The wire protocol between an agent and its front ends. Standard library only.

Framing is apart from messages: a frame is a 4-byte big-endian length and that many
bytes of UTF-8 JSON holding one object; frames over MAX_FRAME are refused before they
are read. Messages:

    {"type": "hello", "version": 1, "token": "..."}                 client -> agent, first
    {"type": "welcome", "version": 1, "session": {...}}             agent -> client
    {"type": "request", "id": 7, "op": "status", "args": {}}        client -> agent
    {"type": "response", "id": 7, "ok": true, "result": ...}        agent -> client
    {"type": "response", "id": 7, "ok": false, "error": {"code": "unknown_op", "message": "..."}}
    {"type": "event", "event": "paused", "data": {...}}             agent -> client, pushed

Every payload is plain JSON data (summaries, never pickles). A request's handler is
found by name (``op_<name>``); an unknown op, bad arguments or a malformed frame gets
an error response with a code from ERROR_CODES, never a crash.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import events
from .schema import SchemaError, Spec, check_args

VERSION = 1
MAX_FRAME = 16 * 1024 * 1024
AUTH_TIMEOUT = 5.0
_HEADER = struct.Struct(">I")

ERROR_CODES = (
    "bad_frame",    # not a frame of JSON object
    "too_large",    # a frame over MAX_FRAME
    "bad_message",  # a JSON object that is not a message
    "version",      # the peer speaks another protocol version
    "auth",         # no token, or a wrong one
    "unknown_op",   # no handler of that name
    "bad_args",     # the handler's arguments did not fit
    "not_paused",   # the request needs the job paused
    "failed",       # the handler raised: the message says what
)


class ProtocolError(Exception):
    """An error with a code from ERROR_CODES; sent to the peer as is."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


# ---------------------------------------------------------------------- framing


def plain(value: Any) -> Any:
    """Strict-JSON data: non-finite floats become "nan", "inf", "-inf"; tuples become
    lists; anything else unknown becomes its str()."""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)



def encode(message: dict[str, Any]) -> bytes:
    """One frame. Non-finite floats must already be strings (report.plain does that)."""
    body = json.dumps(message, allow_nan=False, separators=(",", ":")).encode()
    if len(body) > MAX_FRAME:
        raise ProtocolError("too_large", f"message of {len(body)} bytes is over the {MAX_FRAME}-byte limit")
    return _HEADER.pack(len(body)) + body


class FrameDecoder:
    """Turns a byte stream into messages; raises ProtocolError on the first bad frame."""

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        out = []
        while len(self._buf) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self._buf)
            if n > self.max_frame:
                raise ProtocolError("too_large", f"frame of {n} bytes is over the {self.max_frame}-byte limit")
            if len(self._buf) < _HEADER.size + n:
                break
            body = bytes(self._buf[_HEADER.size:_HEADER.size + n])
            del self._buf[:_HEADER.size + n]
            try:
                msg = json.loads(body.decode())
            except (UnicodeDecodeError, ValueError) as e:
                raise ProtocolError("bad_frame", f"frame is not UTF-8 JSON: {e}") from None
            except RecursionError:
                raise ProtocolError("bad_frame", "frame nests JSON too deeply") from None
            if not isinstance(msg, dict):
                raise ProtocolError("bad_frame", f"frame holds {type(msg).__name__}, not an object")
            out.append(msg)
        return out


# ---------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Request:
    id: int
    op: str
    args: dict[str, Any] = field(default_factory=dict)


def hello(token: str) -> dict[str, Any]:
    return {"type": "hello", "version": VERSION, "token": token}


def request(id: int, op: str, **args: Any) -> dict[str, Any]:
    return {"type": "request", "id": id, "op": op, "args": args}


def ok(id: int, result: Any) -> dict[str, Any]:
    return {"type": "response", "id": id, "ok": True, "result": plain(result)}


def error(id: int | None, code: str, message: str) -> dict[str, Any]:
    return {"type": "response", "id": id, "ok": False, "error": {"code": code, "message": message}}


def event(name: str, data: Any = None) -> dict[str, Any]:
    """An event frame; `name` is one declared in events.py."""
    return {"type": "event", "event": events.check_out(name), "data": plain(data)}



def parse_request(msg: dict[str, Any]) -> Request:
    if msg.get("type") != "request":
        raise ProtocolError("bad_message", f"expected a request, got type {msg.get('type')!r}")
    rid, op, args = msg.get("id"), msg.get("op"), msg.get("args", {})
    if not isinstance(rid, int) or isinstance(rid, bool):
        raise ProtocolError("bad_message", "a request needs an integer id")
    if not isinstance(op, str) or not op.isidentifier():
        raise ProtocolError("bad_message", f"bad op {op!r}")
    if not isinstance(args, dict):
        raise ProtocolError("bad_message", "args must be an object")
    return Request(rid, op, args)


class NotPaused(RuntimeError):
    """A request that needs the paused training thread arrived while the job runs
    (answered with the error code ``not_paused``)."""


class Dispatcher:
    """Finds ``op_<name>`` on `handlers`, checks the request's arguments against
    `schemas` (op -> argument -> Spec; the agent's come from wire/ops.py) and turns
    whatever happens into a response."""

    def __init__(self, handlers: Any, schemas: Mapping[str, dict[str, Spec]]) -> None:
        self.handlers = handlers
        self.schemas = schemas

    def ops(self) -> list[str]:
        return sorted(n[3:] for n in dir(self.handlers) if n.startswith("op_"))

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        try:
            req = parse_request(msg)
        except ProtocolError as e:
            rid = msg.get("id") if isinstance(msg.get("id"), int) else None
            return error(rid, e.code, e.message)
        fn: Callable[..., Any] | None = getattr(self.handlers, f"op_{req.op}", None)
        if fn is None:
            return error(req.id, "unknown_op", f"unknown op {req.op!r}; known: {', '.join(self.ops())}")
        try:
            args = check_args(req.op, self.schemas.get(req.op, {}), req.args)
        except SchemaError as e:
            return error(req.id, "bad_args", str(e))
        try:
            return ok(req.id, fn(**args))
        except ProtocolError as e:
            return error(req.id, e.code, e.message)
        except TypeError as e:
            if _is_call_mismatch(e, fn):
                return error(req.id, "bad_args", f"{req.op}: {e}")
            return error(req.id, "failed", f"TypeError: {e}")
        except BaseException as e:  # SystemExit or KeyboardInterrupt from user code too: the thread lives on
            if isinstance(e, NotPaused):
                return error(req.id, "not_paused", str(e))
            return error(req.id, "failed", f"{type(e).__name__}: {e}")


def _is_call_mismatch(e: TypeError, fn: Callable[..., Any]) -> bool:
    name = getattr(fn, "__name__", "")
    return name in str(e) and ("argument" in str(e))


# ---------------------------------------------------------------------- a blocking connection


class Connection:
    """Frames over a socket: thread-safe send, blocking receive."""

    def __init__(self, sock: socket.socket, max_frame: int = MAX_FRAME) -> None:
        self.sock = sock
        self._decoder = FrameDecoder(max_frame)
        self._pending: list[dict[str, Any]] = []
        self._send_lock = threading.Lock()

    def set_max_frame(self, n: int) -> None:
        """Frames larger than `n` bytes are refused from now on (small before a hello)."""
        self._decoder.max_frame = n

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        with self._send_lock:
            self.sock.sendall(data)

    def recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message, or None at end of stream. TimeoutError when no whole message
        came within `timeout` seconds (a deadline for the message: trickled bytes do not
        extend it)."""
        until = None if timeout is None else time.monotonic() + timeout
        while not self._pending:
            if until is None:
                self.sock.settimeout(None)
            else:
                left = until - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no whole message in time")
                self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                return None
            self._pending.extend(self._decoder.feed(data))
        return self._pending.pop(0)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
