"""The protocol on in-memory streams: framing, messages, dispatch, and random bytes."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepdbg.wire import protocol
from stepdbg.wire.protocol import Connection, Dispatcher, FrameDecoder, ProtocolError
from stepdbg.wire.schema import Int


def test_frames_round_trip_in_pieces():
    msgs = [protocol.request(1, "status"), protocol.event("step", {"loss": float("nan")}), protocol.ok(2, [1, 2])]
    data = b"".join(protocol.encode(protocol.plain(m)) for m in msgs)
    dec = FrameDecoder()
    got = []
    for i in range(0, len(data), 3):  # any split of the stream decodes the same
        got += dec.feed(data[i:i + 3])
    assert got == [protocol.plain(m) for m in msgs]
    assert got[1]["data"] == {"loss": "nan"}


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (struct.pack(">I", protocol.MAX_FRAME + 1), "too_large"),
        (struct.pack(">I", 3) + b"\xff\xfe\xfd", "bad_frame"),
        (struct.pack(">I", 5) + b"[1,2]", "bad_frame"),
        (struct.pack(">I", 4) + b"nope", "bad_frame"),
    ],
)
def test_bad_frames_are_refused_with_a_code(data, code):
    with pytest.raises(ProtocolError) as e:
        FrameDecoder().feed(data)
    assert e.value.code == code


def test_an_oversized_message_is_refused_before_sending():
    with pytest.raises(ProtocolError, match="too_large"):
        protocol.encode({"x": "a" * (protocol.MAX_FRAME + 1)})


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_the_decoder_never_fails_other_than_with_a_protocol_error(data):
    dec = FrameDecoder(max_frame=4096)
    try:
        for m in dec.feed(data):
            assert isinstance(m, dict)
    except ProtocolError as e:
        assert e.code in protocol.ERROR_CODES


SCHEMAS = {"add": {"a": Int(-100, 100), "b": Int(-100, 100)}}


class Handlers:
    def op_add(self, a: int, b: int = 1) -> int:
        return a + b

    def op_fail(self) -> None:
        raise ValueError("it broke")

    def op_paused_only(self) -> None:
        raise protocol.NotPaused("the job is running; pause it first")


@pytest.mark.parametrize(
    ("msg", "expect"),
    [
        (protocol.request(1, "add", a=2, b=3), {"ok": True, "result": 5}),
        (protocol.request(2, "add", a=2), {"ok": True, "result": 3}),
        (protocol.request(3, "nope"), {"ok": False, "code": "unknown_op"}),
        (protocol.request(4, "add", c=1), {"ok": False, "code": "bad_args"}),
        (protocol.request(5, "fail"), {"ok": False, "code": "failed"}),
        (protocol.request(6, "paused_only"), {"ok": False, "code": "not_paused"}),
        ({"type": "request", "id": "x", "op": "add"}, {"ok": False, "code": "bad_message"}),
        ({"type": "request", "id": 7, "op": "__class__"}, {"ok": False, "code": "unknown_op"}),
        ({"type": "request", "id": 8, "op": "a b"}, {"ok": False, "code": "bad_message"}),
        ({"type": "hello"}, {"ok": False, "code": "bad_message"}),
    ],
)
def test_dispatch_turns_everything_into_a_response(msg, expect):
    r = Dispatcher(Handlers(), SCHEMAS).handle(msg)
    assert r["type"] == "response" and r["ok"] is expect["ok"]
    if expect["ok"]:
        assert r["result"] == expect["result"]
    else:
        assert r["error"]["code"] == expect["code"] and r["error"]["message"]
    assert r["id"] == (msg.get("id") if isinstance(msg.get("id"), int) else None)


def test_unknown_op_names_the_known_ones():
    r = Dispatcher(Handlers(), SCHEMAS).handle(protocol.request(1, "ad"))
    assert "known: add, fail, paused_only" in r["error"]["message"]


@pytest.mark.timeout(10)
def test_connection_over_a_socket_pair():
    a, b = socket.socketpair()
    ca, cb = Connection(a), Connection(b)
    ca.send(protocol.request(1, "add", a=1))
    assert cb.recv(timeout=2) == {"type": "request", "id": 1, "op": "add", "args": {"a": 1}}
    with pytest.raises(TimeoutError):
        cb.recv(timeout=0.05)
    ca.close()
    assert cb.recv(timeout=2) is None
    cb.close()
