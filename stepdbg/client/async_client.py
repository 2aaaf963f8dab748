"""The asyncio client, for front ends that live in an event loop (the Textual TUI).

    c = await AsyncClient.connect("ssh://me@node17")
    brk = await c.wait_paused()
    print((await c.evaluate("loss.item()"))["value"])
    await c.cont()
    async for event in c.iter_events(): ...

Same ops as the sync Client (both inherit client.Ops); the same TARGET forms.
Standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..wire import events, protocol
from ..wire.address import parse as address_of
from ..wire.address import unix_name
from .connection import OUTPUT_TAIL, ClientError, Ops, resolve, settle
from .targets import Endpoint, TargetError


class AsyncClient(Ops):
    def __init__(self, frames: _Frames, writer: asyncio.StreamWriter, welcome: dict[str, Any],
                 closer: Callable[[], None] | None) -> None:
        self._frames, self._w = frames, writer
        self.session: dict[str, Any] = welcome.get("session", {})
        self.status_at_attach: dict[str, Any] = welcome.get("status", {})
        self.paused: dict[str, Any] | None = self.status_at_attach.get("paused")
        self.exited: dict[str, Any] | None = None
        self.output_tail: deque[str] = deque(maxlen=OUTPUT_TAIL)
        self.events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._changed = asyncio.Condition()
        self._closer = closer
        # Requests go out by a socket of their own (the same connection, another descriptor):
        # a request written after the job closed its end fails alone. Written by the stream's
        # transport, its broken pipe closed the reading side too, and the events not yet read
        # (a Ctrl-C's change, the job's end) were lost: the TUI said neither.
        self._out = socket.socket(fileno=os.dup(writer.get_extra_info("socket").fileno()))
        self._out.setblocking(False)
        self._sending = asyncio.Lock()  # (one request's bytes at a time: sends may be partial)
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, target: str | None = None, token: str | None = None, timeout: float = 10.0,
                      probe: bool = False) -> AsyncClient:
        ep = await asyncio.to_thread(resolve, target, token)  # ssh listing blocks: off the loop
        return await cls.connect_endpoint(ep, timeout, probe)

    @classmethod
    async def connect_endpoint(cls, ep: Endpoint, timeout: float = 10.0, probe: bool = False) -> AsyncClient:
        """Connect to a resolved endpoint; its `close` (an ssh tunnel) goes with the client."""
        try:
            return await asyncio.wait_for(cls._open(ep.address, ep.token, ep.close, probe), timeout)
        except (OSError, TimeoutError) as e:
            if ep.close is not None:
                ep.close()
            raise TargetError(f"cannot connect to {ep.address}: {e} (has the job ended?)") from None
        except BaseException:
            if ep.close is not None:
                ep.close()
            raise

    @classmethod
    async def _open(cls, address: str, token: str, closer: Callable[[], None] | None, probe: bool) -> AsyncClient:
        addr = address_of(address)
        if addr.path is not None:
            with unix_name(addr.path) as name:  # any depth of runtime directory
                reader, writer = await asyncio.open_unix_connection(name, limit=protocol.MAX_FRAME)
        else:
            reader, writer = await asyncio.open_connection(addr.host, addr.port, family=socket.AF_UNSPEC,
                                                           limit=protocol.MAX_FRAME)
        writer.write(protocol.encode({**protocol.hello(token), **({"role": "probe"} if probe else {})}))
        frames = _Frames(reader)
        welcome = await frames.next()
        if welcome is None or welcome.get("type") != "welcome":
            writer.close()
            err = (welcome or {}).get("error") or {}
            raise ClientError(err.get("code", "bad_message"), f"{address} refused: {err.get('message', welcome)}")
        return cls(frames, writer, welcome, closer)

    async def _read(self) -> None:
        lost = "the connection to the job closed"
        try:
            while True:
                msg = await self._frames.next()
                if msg is None:
                    break
                if msg.get("type") == "response":
                    settle(self._waiting, msg)  # (one nobody waits for is dropped: the refusal came in the welcome)
                elif msg.get("type") == "event" and events.check_in(msg.get("event"), msg.get("data")):
                    self._track(msg.get("event"), msg.get("data"))
                    await self.events.put(msg)
                    async with self._changed:
                        self._changed.notify_all()
        except (OSError, protocol.ProtocolError) as e:
            lost = f"lost the connection to the job: {e}"
        finally:
            if self.exited is None:
                self.exited = {"exit_code": None, "lost": lost}
                self.events.put_nowait({"type": "event", "event": "lost", "data": lost})
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(lost))
            self._waiting.clear()
            async with self._changed:
                self._changed.notify_all()

    async def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:  # type: ignore[override]
        if self.exited is not None and "lost" in self.exited:
            raise ConnectionError(self.exited["lost"])
        rid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        try:
            async with self._sending:
                await asyncio.get_running_loop().sock_sendall(self._out, protocol.encode(protocol.request(rid, op, **args)))
        except OSError:
            self._waiting.pop(rid, None)
            raise
        return await asyncio.wait_for(fut, timeout)

    async def wait_paused(self, timeout: float | None = None, previous: dict[str, Any] | None = None
                          ) -> dict[str, Any] | None:
        def ready() -> bool:
            return (self.paused is not None and self.paused is not previous) or self.exited is not None

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(ready), timeout)
        return self.paused if self.paused is not previous else None

    async def wait_exited(self, timeout: float | None = None) -> dict[str, Any] | None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self.exited is not None), timeout)
        return self.exited

    async def iter_events(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await self.events.get()

    async def close(self, then: str = "stay") -> None:
        if self.exited is None:
            try:
                await self.call("detach", timeout=5, then=then)
            except (ClientError, ConnectionError, TimeoutError, OSError):
                pass
        self._out.close()
        self._w.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._w.wait_closed()  # the agent must see the hang-up now, not at the next loop turn
        self._task.cancel()
        if self._closer is not None:
            await asyncio.to_thread(self._closer)


class _Frames:
    """Messages from an asyncio stream (the async twin of protocol.Connection.recv)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.decoder = protocol.FrameDecoder()
        self.pending: list[dict[str, Any]] = []

    async def next(self) -> dict[str, Any] | None:
        while not self.pending:
            data = await self.reader.read(65536)
            if not data:
                return None
            self.pending.extend(self.decoder.feed(data))
        return self.pending.pop(0)
