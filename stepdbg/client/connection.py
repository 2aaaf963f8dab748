"""The sync client: one connection to a job's agent, its ops as methods, pushed events
tracked (paused, resumed, exited, output). See ``stepdbg.client`` for an example.

TARGET forms: a session id or pid, a socket path, HOST:PORT (TCP), or
``ssh://[user@]host[:port][/session]``. Standard library only; never imports torch.
"""

from __future__ import annotations

import itertools
import os
import queue
import socket
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any

from ..wire import events, protocol, sessions
from ..wire.address import looks_like_hostport, unix_name
from ..wire.address import parse as address_of
from ..wire.ops import OpCalls
from .targets import (
    Endpoint,
    TargetError,
    find_job,
    find_local,
    gone_line,
)


class ClientError(Exception):
    """The agent answered with an error (``code`` from protocol.ERROR_CODES)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def settle(waiting: dict[Any, Any], msg: dict[str, Any]) -> ClientError | None:
    """A response to the future that waits for it (a concurrent or an asyncio Future): its
    result or its ClientError. A response no request waits for (the agent refusing the
    connection) is returned as the error it carries; one already settled is dropped."""
    fut = waiting.pop(msg.get("id"), None) if msg.get("id") is not None else None
    err = msg.get("error") or {}
    if fut is None:
        return ClientError(err.get("code", "failed"), err.get("message", "connection refused"))
    if not fut.done():
        if msg.get("ok"):
            fut.set_result(msg.get("result"))
        else:
            fut.set_exception(ClientError(err.get("code", "failed"), err.get("message", "")))
    return None


DYING_S = 2.0  # how long a lost connection's job may take to be gone once its sockets closed (a guard)
OUTPUT_TAIL = 20  # lines of a job's forwarded output kept per client (a dead rank's last words)


def _gone(pid: int) -> bool:
    """Whether process `pid` of this machine has ended (a zombie has: only its parent's wait is left)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def lost_words(session: dict[str, Any], lost: str) -> str:
    """What a client says when its connection ended without the job's end: `lost`, and on
    this machine whether the job is gone (its exit code cannot be known: it was no child of
    ours, and a kill -9 or a crash let its agent say nothing) or still runs."""
    pid = session.get("pid")
    if not isinstance(pid, int) or session.get("host") not in (None, sessions.node_name()):
        return lost
    deadline = time.monotonic() + DYING_S  # (a job killed closes its sockets a moment before it is gone)
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    gone = gone_words(session)
    if gone is not None:
        return f"{lost}; {gone}"
    return f"{lost}; the job (pid {pid}) still runs: `stepdbg attach {session.get('id', pid)}` tries again"


def gone_words(session: dict[str, Any]) -> str | None:
    """'the job (pid N) is gone, ...' where the session's process of this machine has ended
    (its exit code cannot be known: it was no child of ours); None where it runs, or is elsewhere."""
    pid = session.get("pid")
    if not isinstance(pid, int) or session.get("host") not in (None, sessions.node_name()) or not _gone(pid):
        return None
    return gone_line(pid)


class Ops(OpCalls):
    """The agent's ops as methods (``wire.ops.OpCalls``, generated from the op table) over
    ``self.call``: the sync Client returns results, the AsyncClient coroutines. Resuming
    ops forget the current pause first, so that wait_paused() waits for the next one."""

    paused: dict[str, Any] | None
    exited: dict[str, Any] | None
    output_tail: deque[str]
    remote = True  # the job runs in another process (the console treats Ctrl-C so)
    many_ranks = False  # one process (a RankView is the source of many)

    def _forget_pause(self) -> dict[str, Any] | None:
        kept, self.paused = self.paused, None
        return kept

    def _pause_stands(self, kept: Any, error: BaseException) -> None:
        if isinstance(error, ClientError) and kept is not None and self.paused is None:
            self.paused = kept  # (refused: the job did not go on)

    def _track(self, name: str | None, data: Any) -> None:
        """Keep `paused` and `exited` in step with the job's events."""
        if name == "paused":
            self.paused = data
        elif name == "resumed":
            self.paused = None
        elif name == "exited":
            self.exited = data
        elif name == "output":
            for block in data if isinstance(data, list) else [data]:
                self.output_tail.extend(block.get("lines", []))


class Client(Ops):
    """A connection to one agent. Thread-safe; events arrive on a reader thread."""

    def __init__(self, conn: protocol.Connection, welcome: dict[str, Any], closer: Any = None) -> None:
        self.conn = conn
        self.session: dict[str, Any] = welcome.get("session", {})
        self.again = str(self.session.get("id"))  # what `stepdbg attach` takes to come back (connect() sets it)
        self.status_at_attach: dict[str, Any] = welcome.get("status", {})
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.paused: dict[str, Any] | None = (self.status_at_attach or {}).get("paused")
        self.exited: dict[str, Any] | None = None
        self.output_tail: deque[str] = deque(maxlen=OUTPUT_TAIL)
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future[Any]] = {}
        self._cv = threading.Condition()
        self._closer = closer  # e.g. the ssh tunnel
        self._reader = threading.Thread(target=self._read, name="stepdbg-client-reader", daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ plumbing

    def _read(self) -> None:
        error: Exception = ConnectionError("the connection to the job closed")
        try:
            while True:
                msg = self.conn.recv(timeout=None)
                if msg is None:
                    break
                if msg.get("type") == "response":
                    error = settle(self._waiting, msg) or error
                elif msg.get("type") == "event" and events.check_in(msg.get("event"), msg.get("data")):
                    self._on_event(msg)
        except (OSError, protocol.ProtocolError) as e:
            error = ConnectionError(f"lost the connection to the job: {e}")
        finally:
            with self._cv:
                if self.exited is None:
                    self.exited = {"exit_code": None, "lost": str(error)}
                self._cv.notify_all()
            for fut in list(self._waiting.values()):
                if not fut.done():
                    fut.set_exception(error)
            self._waiting.clear()

    def _on_event(self, msg: dict[str, Any]) -> None:
        with self._cv:
            self._track(msg.get("event"), msg.get("data"))
            self._cv.notify_all()
        self.events.put(msg)

    def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:
        """Send one request and wait for its answer; ClientError on an error response."""
        if self.exited is not None and "lost" in self.exited:
            raise ConnectionError(self.exited["lost"])
        rid = next(self._ids)
        fut: Future[Any] = Future()
        self._waiting[rid] = fut
        try:
            self.conn.send(protocol.request(rid, op, **args))
        except OSError as e:
            self._waiting.pop(rid, None)
            raise ConnectionError(f"lost the connection to the job: {e}") from None
        return fut.result(timeout=timeout)

    def wait_paused(self, timeout: float | None = None, previous: dict[str, Any] | None = None
                    ) -> dict[str, Any] | None:
        """The break the job is paused at, other than `previous` (waiting for one);
        None on timeout or when the job ended."""
        def ready() -> bool:
            return (self.paused is not None and self.paused is not previous) or self.exited is not None

        with self._cv:
            self._cv.wait_for(ready, timeout=timeout)
            return self.paused if self.paused is not previous else None

    def wait_resumed(self, timeout: float | None = None) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self.paused is None or self.exited is not None, timeout=timeout)

    def wait_exited(self, timeout: float | None = None) -> dict[str, Any] | None:
        with self._cv:
            self._cv.wait_for(lambda: self.exited is not None, timeout=timeout)
            return self.exited

    def _forget_pause(self) -> dict[str, Any] | None:
        with self._cv:
            return super()._forget_pause()

    def _pause_stands(self, kept: Any, error: BaseException) -> None:
        with self._cv:
            super()._pause_stands(kept, error)

    eval = Ops.evaluate

    def close(self, then: str = "stay") -> None:
        """Leave. `then`: "stay" (a paused job waits for a re-attach), "continue", "end"."""
        if self.exited is None:
            try:
                self.call("detach", timeout=5, then=then)
            except (ClientError, ConnectionError, TimeoutError, OSError):
                pass
        self.conn.close()
        if self._closer is not None:
            self._closer()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

# ---------------------------------------------------------------------- connecting


def connect_address(address: str, token: str, timeout: float = 10.0, closer: Any = None,
                    probe: bool = False) -> Client:
    """Connect to a socket path or HOST:PORT and say hello with `token`.

    A `probe` (``stepdbg ls``) reads status without counting as an attached front end."""
    addr = address_of(address)
    sock = socket.socket(addr.family, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        if addr.path is not None:
            with unix_name(addr.path) as name:  # any depth of runtime directory
                sock.connect(name)
        else:
            sock.connect(addr.sockaddr)
    except OSError as e:
        sock.close()
        raise TargetError(f"cannot connect to {address}: {e.strerror or e} (has the job ended?)") from None
    conn = protocol.Connection(sock)
    try:
        conn.send({**protocol.hello(token), **({"role": "probe"} if probe else {})})
        welcome = conn.recv(timeout=timeout)
    except (OSError, protocol.ProtocolError) as e:
        conn.close()
        raise TargetError(f"no answer from {address}: {e}") from None
    if welcome is None:
        conn.close()
        raise TargetError(f"{address} closed the connection (has the job ended?)")
    if welcome.get("type") != "welcome":
        conn.close()
        err = welcome.get("error") or {}
        raise ClientError(err.get("code", "bad_message"), f"{address} refused: {err.get('message', welcome)}")
    return Client(conn, welcome, closer)


def resolve(target: str | None = None, token: str | None = None) -> Endpoint:
    """Find TARGET (see the module docstring); for ssh:// this opens the tunnel."""
    if target and target.startswith("ssh://"):
        from .remote import open_tunnel

        return open_tunnel(target)
    if target and token is None and looks_like_hostport(target):
        raise TargetError(f"{target} is a TCP address: pass its token (--token-file FILE or STEPDBG_TOKEN; `stepdbg ls --json --with-token` on the job's machine shows it)")
    if target and token is not None:
        try:
            address_of(target, listen=False)  # a port out of range is said in one line, before connecting
        except ValueError as e:
            raise TargetError(str(e)) from None
        return Endpoint(target, token)
    info = find_local(target)
    return Endpoint(info.reach, info.token)


def connect(target: str | None = None, token: str | None = None, timeout: float = 10.0) -> Client:
    """Connect to TARGET (see the module docstring)."""
    ep = resolve(target, token)
    try:
        c = connect_address(ep.address, ep.token, timeout, closer=ep.close)
    except Exception:
        if ep.close is not None:
            ep.close()
        raise
    if target and target.startswith("ssh://"):  # over ssh, coming back is over ssh too
        from .remote import ssh_target

        t = ssh_target(target)
        c.again = f"ssh://{t.dest}{f':{t.port}' if t.port else ''}/{c.again}"
    return c


def connect_job(job: str | None = None, timeout: float = 10.0) -> list[Client]:
    """One client per rank of a local distributed job, in rank order."""
    clients: list[Client] = []
    try:
        for info in find_job(job):
            clients.append(connect_address(info.reach, info.token, timeout))
    except Exception:
        for c in clients:
            c.close()
        raise
    return clients


