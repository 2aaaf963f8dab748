"""A client's outbound messages: any thread enqueues, one sender thread writes.

The training thread must never wait on a client: a console suspended with Ctrl-Z, a
laptop asleep at the end of an ssh tunnel or a client that pipelines requests without
reading would otherwise stop the job at its next event. So ``put()`` never blocks: the
message is encoded and, when nothing is queued before it, written at once with a send
that cannot block (MSG_DONTWAIT); what the socket does not take is queued for the sender
thread. Waking that thread for every answer had cost more than the answer (a status is
50 us; three thread hand-offs a request, each taking the GIL from the training thread,
made ten clients polling `status` slow a 0.8 ms step 1.33x). A full queue, or a client
that takes no bytes for ``stall`` seconds, gets that client dropped (its socket shut, so
its reader thread ends and the client is counted detached).
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from stepdbg.wire import protocol, settings

QUEUE_LIMIT = 1_000  # messages; step and output events are coalesced upstream (10 a second)


def _stall_seconds() -> float:
    return settings.seconds_or_default("STEPDBG_CLIENT_STALL") or 30.0


class Outbox:
    """Bounded, non-blocking sending to one client over `sock`."""

    def __init__(self, sock: socket.socket, on_drop: Callable[[str], None], limit: int = QUEUE_LIMIT,
                 stall: float | None = None, name: str = "stepdbg-sender") -> None:
        self.sock = sock
        self.on_drop = on_drop  # told why, once, when the client is dropped
        self.stall = _stall_seconds() if stall is None else stall
        self.limit = limit
        self.dropped: str | None = None
        self._items: deque[bytes | None] = deque()  # None: the end (sent after what is before it)
        self._sending = False  # the sender thread holds an item taken from _items
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._send_loop, name=name, daemon=True)
        self._thread.start()

    def put(self, message: dict[str, Any]) -> bool:
        """Queue `message`; False when the client is (now) dropped. Never blocks.

        A response too large for one frame becomes an error response with the same id,
        so the client learns why instead of waiting."""
        if self.dropped is not None:
            return False
        try:
            data = protocol.encode(message)
        except protocol.ProtocolError as e:
            if message.get("type") != "response":
                return True  # an event too large to send is not worth a client
            data = protocol.encode(protocol.error(message.get("id"), e.code,
                                                  f"the answer is too large to send ({e.message}); ask for less"))
        return self.put_encoded(data)

    def put_encoded(self, data: bytes) -> bool:
        """Send or queue a message already encoded (an event for every client is encoded once)."""
        failed = None
        with self._cond:
            if self.dropped is not None:
                return False
            if not self._items and not self._sending:  # nothing before it: straight to the socket
                try:
                    data = data[self.sock.send(data, socket.MSG_DONTWAIT):]
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as e:
                    failed = e
                if not data and failed is None:
                    return True
            if failed is None:
                if len(self._items) >= self.limit:
                    failed = f"it fell {self.limit} messages behind"
                else:
                    self._items.append(data)
                    self._cond.notify()
                    return True
        self._failed(failed)
        return False

    def _failed(self, why: BaseException | str) -> None:
        if isinstance(why, (BrokenPipeError, ConnectionResetError)):  # the client went away (killed, closed)
            self.drop(f"it went away: {why}", say=False)
        elif isinstance(why, BaseException):  # closed under us
            self.drop(f"the connection failed: {why}")
        else:
            self.drop(why)

    def drop(self, why: str, say: bool = True) -> None:
        """Stop sending and shut the socket (the reader thread then ends the connection);
        `say`: tell on_drop (a client that went away by itself is not news)."""
        with self._cond:
            if self.dropped is not None:
                return
            self.dropped = why
            self._items.clear()
            self._cond.notify()  # wake the sender so it ends
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        if say:
            self.on_drop(why)

    def stop(self) -> None:
        """The connection is ending anyway: the sender stops, and says nothing of it."""
        with self._cond:
            if self.dropped is None:
                self.dropped = "closed"
            self._items.clear()
            self._cond.notify()

    def close(self, wait: float | None = None) -> None:
        """Send what is queued (waiting at most `wait` seconds, default `stall`), then stop."""
        with self._cond:
            self._items.append(None)
            self._cond.notify()
        self._thread.join(timeout=self.stall if wait is None else wait)

    def _send_loop(self) -> None:
        while True:
            with self._cond:
                while not self._items and self.dropped is None:
                    self._cond.wait()
                if self.dropped is not None or self._items[0] is None:
                    return
                data = self._items.popleft()
                self._sending = True
            assert data is not None
            sent = self._send_all(data)
            with self._cond:
                self._sending = False
            if not sent:
                return

    def _send_all(self, data: bytes) -> bool:
        view = memoryview(data)
        deadline = time.monotonic() + self.stall
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                self.drop(f"it read nothing for {self.stall:g}s")
                return False
            try:
                _, writable, _ = select.select([], [self.sock], [], min(left, 1.0))
                if not writable:
                    continue
                # MSG_DONTWAIT: never block here, whatever timeout the reader set on the socket.
                n = self.sock.send(view, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                continue
            except (OSError, ValueError) as e:
                self._failed(e if isinstance(e, OSError) else OSError(str(e)))
                return False
            view = view[n:]
            deadline = time.monotonic() + self.stall  # progress: the client reads
        return True
