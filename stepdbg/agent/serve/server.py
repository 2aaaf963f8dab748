"""The agent's server: one listener thread, and for each client a reader, a request
worker and a sender; the token first.

It always listens on a Unix socket in the per-user runtime directory (0700), so file
permissions keep other local users out; TCP too when asked (``--listen``, 127.0.0.1
unless a host is given). Before its hello a connection may send one small frame and has
AUTH_TIMEOUT seconds for the whole handshake; at most MAX_UNAUTHENTICATED such
connections wait at once on each listener, and at most PER_PEER from one TCP address, so
silent TCP connections cannot lock out the owner, who comes in through the socket.
Afterwards every message to a client goes through its Outbox, so the training thread
never waits on a client, and requests run one at a time on the client's worker (paced
while the job runs, pace.py) while its reader stays free for `interrupt`. A client that
sends garbage, vanishes, stops reading or never speaks changes nothing for the job.
"""

from __future__ import annotations

import contextlib
import hmac
import itertools
import os
import queue
import secrets
import socket
import sys
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from stepdbg.agent.breaks.told import told
from stepdbg.agent.measure.frames import SELECTOR
from stepdbg.agent.serve.exited import exited_data
from stepdbg.agent.serve.handlers import Handlers
from stepdbg.agent.serve.outbox import Outbox
from stepdbg.agent.serve.pace import Bucket, Pace
from stepdbg.agent.serve.peer import REQUESTS_IN_FLIGHT, Peer
from stepdbg.wire import protocol, sessions, settings
from stepdbg.wire.address import parse as address_of
from stepdbg.wire.address import unix_name
from stepdbg.wire.numbers import env_int
from stepdbg.wire.ops import SCHEMAS

if TYPE_CHECKING:
    from stepdbg.agent.session import Session

STEP_EVENTS_PER_SECOND = 10
STEPS_KEPT = 500  # the step records one step event carries at most (a front end's plots keep 500)
BACKLOG = 128
MAX_UNAUTHENTICATED = 16  # connections waiting to say hello at once, per listener; more are closed at once
PER_PEER = 4  # of those, from one TCP address
PREAUTH_MAX_FRAME = 4096  # a hello is tiny
INLINE_OPS = frozenset({"status"})  # answered by the reader: cheap, and never waits for the training thread
WORKERS_GRACE = 1.0  # seconds the end waits for requests still running (a torch call among them)


class Server:
    """Serves one session; start() returns once it listens and the session file exists."""

    def __init__(self, session: Session, listen: str | None = None) -> None:
        self.session = session
        self.listen = listen
        self.token = secrets.token_hex(32)
        self.info: sessions.SessionInfo | None = None
        self._socks: list[socket.socket] = []
        self._peers: set[Peer] = set()
        self._job_pace = Bucket()  # all clients' requests together, while the job runs
        self._threads: set[threading.Thread] = set()  # each connection's reader and request worker, while they run
        self._unauthenticated: dict[str, int] = {}  # per listener ("unix", "tcp") and per TCP address
        self._connections = itertools.count(1)  # (client N's threads say N: the Threads panel tells two apart)
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._steps: deque[dict[str, Any]] = deque(maxlen=STEPS_KEPT)  # step records not yet sent
        self._batch_lock = threading.Lock()  # one sender of batches at a time: one never overtakes the event after it
        self._output: list[dict[str, Any]] = []

    def start(self) -> Server:
        d = sessions.ensure_private_dir(sessions.runtime_dir())
        local = os.path.join(d, f"{os.getpid()}.sock")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(local)
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            with unix_name(local) as name:  # any depth of runtime directory
                unix.bind(name)
        finally:
            os.umask(old)
        self._socks.append(unix)
        address = local
        if self.listen:
            addr = address_of(self.listen)
            tcp = socket.socket(addr.family, socket.SOCK_STREAM)
            self._socks.append(tcp)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcp.bind(addr.sockaddr)
            host = f"[{addr.host}]" if ":" in addr.host else addr.host
            address = f"{host}:{tcp.getsockname()[1]}"
        for sock in self._socks:
            sock.listen(BACKLOG)
        s = self.session
        self.info = sessions.SessionInfo(
            id=str(os.getpid()), pid=os.getpid(), host=sessions.node_name(), argv=s.argv,
            address=address, local=local, token=self.token, started=time.time(),
            rank=env_int("RANK"), local_rank=env_int("LOCAL_RANK"), world_size=env_int("WORLD_SIZE"),
            job_id=os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID"),
        )
        sessions.write(self.info)
        s.bus.listeners.append(self._on_session_event)
        for sock in self._socks:
            threading.Thread(target=self._accept_loop, args=(sock,), name="stepdbg-server", daemon=True).start()
        threading.Thread(target=self._step_flusher, name="stepdbg-steps", daemon=True).start()
        return self

    def stop(self, exit_code: int | None = None, error: str | None = None) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._flush_output()
        self._flush_steps()  # every step's record, then the end (the plots reach the last step)
        with self._lock:
            peers = list(self._peers)
        deadline = time.monotonic() + WORKERS_GRACE
        for p in peers:  # a request taken is answered (a cont that let the job end), then the end: a request
            p.answered(deadline - WORKERS_GRACE / 2)  # never answered leaves the exited event half the grace
        self.broadcast(protocol.event("exited", exited_data(self.session, exit_code, error)))
        for p in peers:  # the exited event goes out first; clients that do not read wait for nobody (1 s in all)
            p.outbox.close(wait=max(0.0, deadline - time.monotonic()))
        for p in peers:
            p.outbox.stop()  # (a sender still writing ends unsaid: the socket closes under it)
            p.conn.close()
        # A connection's thread in a torch call (a status, a tensor's statistics) as the
        # interpreter finalizes would abort the process (see Watchdog.stop): they end with
        # their connections; wait a little for them.
        deadline = time.monotonic() + WORKERS_GRACE
        with self._lock:  # (a second grace: 2 s at most in all, whatever the clients)
            threads = [t for t in self._threads if t is not threading.current_thread()]
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        for sock in self._socks:
            with contextlib.suppress(OSError):
                sock.close()
        if self.info is not None:
            sessions.remove(self.info)

    @property
    def attach_command(self) -> str:
        assert self.info is not None
        if not self.listen:
            return f"stepdbg attach {self.info.id}"
        return (f"stepdbg attach {self.info.address} --token-file FILE (FILE holding session {self.info.id}'s "
                "token, which 'stepdbg ls --json --with-token' shows on this machine)")

    def _on_session_event(self, name: str, data: Any) -> None:
        if name == "step":
            with self._lock:  # batched: at most STEP_EVENTS_PER_SECOND go out, each with the records before it
                self._steps.append(data)
            return
        if name == "output":
            with self._lock:
                self._output.append(data)  # batched by the flusher
            return
        self._flush_output()  # the job's lines before this event come first
        if name in ("break", "paused"):
            self._flush_steps()  # the steps before the break come first
            data = told(data)  # (its strings cut: an error's message of megabytes was over the frame, dropped)
        self.broadcast(protocol.event(name, data))

    def _step_flusher(self) -> None:
        while not self._stopped.wait(1 / STEP_EVENTS_PER_SECOND):
            self._flush_output()
            self._flush_steps()

    def _flush_steps(self) -> None:
        """The step records since the last step event, as one: the latest record, with the
        ones before it in `earlier` (a front end's history misses no step)."""
        with self._batch_lock:
            with self._lock:
                batch, self._steps = list(self._steps), deque(maxlen=STEPS_KEPT)
            if batch and self._peers:
                self.broadcast(protocol.event("step", {**batch[-1], "earlier": batch[:-1]}))

    def _flush_output(self) -> None:
        with self._batch_lock:
            with self._lock:
                batch, self._output = self._output, []
            if batch and self._peers:
                self.broadcast(protocol.event("output", batch))

    def broadcast(self, message: dict[str, Any]) -> None:
        """Queue `message` for every client, encoded once for all; never waits (see Outbox)."""
        with self._lock:
            peers = list(self._peers)
        if not peers:
            return
        try:
            data = protocol.encode(message)
        except protocol.ProtocolError:
            return  # an event too large to send is not worth a client
        for p in peers:
            p.outbox.put_encoded(data)

    def _tracked(self, target: Any, args: tuple[Any, ...]) -> None:
        try:
            target(*args)
        finally:
            with self._lock:
                self._threads.discard(threading.current_thread())

    def _started_thread(self, target: Any, args: tuple[Any, ...], name: str) -> None:
        t = threading.Thread(target=self._tracked, args=(target, args), name=name, daemon=True)
        with self._lock:
            self._threads.add(t)
        t.start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopped.is_set():
            try:
                sock, peer = listener.accept()
            except OSError:
                return
            slots = ["unix"] if listener.family == socket.AF_UNIX else ["tcp", f"tcp {peer[0]}"]
            with self._lock:
                crowded = (self._unauthenticated.get(slots[0], 0) >= MAX_UNAUTHENTICATED
                           or len(slots) > 1 and self._unauthenticated.get(slots[1], 0) >= PER_PEER)
                if not crowded:
                    for k in slots:
                        self._unauthenticated[k] = self._unauthenticated.get(k, 0) + 1
            if crowded:  # a flood of silent connections must not cost the job threads or memory
                with contextlib.suppress(OSError):
                    sock.close()
                continue
            self._started_thread(self._serve, (sock, slots), f"stepdbg-client-{next(self._connections)}")

    def _serve(self, sock: socket.socket, slots: list[str]) -> None:
        conn = protocol.Connection(sock, max_frame=PREAUTH_MAX_FRAME)
        try:
            role = self._handshake(conn)
        except Exception:  # never let a client take the job down
            role = None
        finally:
            with self._lock:
                for k in slots:
                    self._unauthenticated[k] -= 1
                    if not self._unauthenticated[k]:
                        del self._unauthenticated[k]
        if role is None:
            conn.close()
            return
        conn.set_max_frame(protocol.MAX_FRAME)
        me = threading.current_thread().name  # stepdbg-client-N: its worker and sender say N too
        peer = Peer(conn, Outbox(sock, on_drop=lambda why: self.session.say(f"dropped a client: {why}"),
                                 name=f"{me}-sender"), role)
        requests = peer.requests
        pace = Pace(job=self._job_pace)
        worker = threading.Thread(target=self._tracked, args=(self._work, (peer, requests, pace)),
                                  name=f"{me}-requests", daemon=True)
        try:
            assert self.info is not None  # (forwards: a window not given the job's output says where it goes)
            forwards = bool(getattr(getattr(self.session, "config", None), "forward_output", False))
            with self._lock:  # (an event broadcast from the welcome's status on reaches it: a pause between the
                peer.outbox.put({"type": "welcome", "version": protocol.VERSION,  # two was heard by no one)
                                 "session": {**self.info.public(), "forward_output": forwards},
                                 "status": protocol.plain(self.session.views.status())})
                self._peers.add(peer)
            if role != "probe":
                self.session.attach()
                peer.attached = True
            with self._lock:
                self._threads.add(worker)
            worker.start()
            self._read(peer, requests, pace)
        except Exception as e:  # never let a client take the job down
            self.session.say(f"client connection failed: {type(e).__name__}: {e}")
        finally:
            with self._lock:
                self._peers.discard(peer)
            with contextlib.suppress(queue.Full):
                requests.put_nowait(None)
            if peer.attached:  # exactly once, whoever noticed the client was gone
                peer.attached = False
                self.session.detach(peer.then)
            peer.outbox.stop()  # its sender thread ends too
            conn.close()

    def _read(self, peer: Peer, requests: queue.Queue[dict[str, Any] | None], pace: Pace) -> None:
        """Read requests until the client goes; `interrupt` is answered here at once, and so
        is a `status` the worker has nothing before (a hand-off to it costs more than the answer)."""
        handlers = protocol.Dispatcher(Handlers(self.session, peer), SCHEMAS)
        running, _ = self._running, SELECTOR.set(peer)  # (u and d select this client's frame)
        while peer.outbox.dropped is None:  # (the end closes the connection: recv ends)
            try:
                msg = peer.conn.recv(timeout=None)
            except protocol.ProtocolError as e:
                # The stream cannot be trusted past a bad frame: say why, then hang up.
                peer.outbox.put(protocol.error(None, e.code, e.message))
                peer.outbox.close()
                return
            except OSError:
                return
            if msg is None:
                return
            if self._stopped.is_set():  # the end waits for the requests taken: this one is told, not taken
                rid = msg.get("id") if isinstance(msg.get("id"), int) else None
                peer.outbox.put(protocol.error(rid, "failed", "the job is ending"))
                continue
            if msg.get("op") == "interrupt":
                peer.outbox.put(handlers.handle(msg))
                continue
            if msg.get("op") in INLINE_OPS and requests.unfinished_tasks == 0 and pace.now_or_never(running):
                self._answer(peer, handlers, msg, pace, paced=True)
                continue
            try:
                requests.put_nowait(msg)
            except queue.Full:
                rid = msg.get("id") if isinstance(msg.get("id"), int) else None
                peer.outbox.put(protocol.error(rid, "failed", f"more than {REQUESTS_IN_FLIGHT} requests in flight"))
                self._stopped.wait(0.05)  # a client that floods its queue is read slower, not the job

    def _work(self, peer: Peer, requests: queue.Queue[dict[str, Any] | None], pace: Pace) -> None:
        """Run a client's requests one at a time (they may wait for the training thread)."""
        handlers, _ = protocol.Dispatcher(Handlers(self.session, peer), SCHEMAS), SELECTOR.set(peer)
        while True:
            msg = requests.get()
            try:
                if msg is None or peer.outbox.dropped is not None:
                    return
                self._answer(peer, handlers, msg, pace)
            finally:
                requests.task_done()

    def _answer(self, peer: Peer, handlers: protocol.Dispatcher, msg: dict[str, Any], pace: Pace,
                paced: bool = False) -> None:
        """Answer `msg` once `pace` lets it run (`paced`: it already did)."""
        if not paced:
            pace.wait(self._running, self._stopped)
        running, cpu = self.session.paused is None, time.thread_time()
        try:
            peer.outbox.put(handlers.handle(msg))
        except Exception as e:  # an answer that cannot even be encoded
            peer.outbox.put(protocol.error(msg.get("id") if isinstance(msg.get("id"), int) else None,
                                           "failed", f"{type(e).__name__}: {e}"))
        if running:  # (this thread's CPU: a request that waited for the training thread cost it nothing)
            pace.spent(time.thread_time() - cpu)

    def _running(self) -> bool:
        return self.session.paused is None

    def _handshake(self, conn: protocol.Connection) -> str | None:
        """The client's role ("frontend" or "probe") once its token is right, else None."""
        try:
            msg = conn.recv(timeout=settings.seconds_or_default("STEPDBG_AUTH_TIMEOUT"))
        except TimeoutError:
            self._refuse(conn, "auth", "no hello with the session token in time")
            return None
        except protocol.ProtocolError as e:
            self._refuse(conn, e.code, e.message)
            return None
        except OSError:
            return None
        if msg is None:
            return None
        if msg.get("type") != "hello":
            self._refuse(conn, "auth", "the first message must be a hello with the token")
            return None
        if msg.get("version") != protocol.VERSION:
            self._refuse(conn, "version", f"this agent speaks protocol {protocol.VERSION}, not {msg.get('version')!r}")
            return None
        token = msg.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(
                token.encode("utf-8", "surrogatepass"), self.token.encode()):
            self._refuse(conn, "auth", "wrong token")
            return None
        return "probe" if msg.get("role") == "probe" else "frontend"

    @staticmethod
    def _refuse(conn: protocol.Connection, code: str, message: str) -> None:
        """One small error frame to a peer that is not (yet) trusted; it may not read it."""
        with contextlib.suppress(OSError, protocol.ProtocolError):
            conn.sock.settimeout(1.0)
            conn.send(protocol.error(None, code, message))


def serve(session: Session, listen: str | None = None, announce: bool = True) -> Server:
    """Start serving `session`; with `announce`, print the attach command on stderr."""
    server = Server(session, listen).start()
    session.server = server
    if announce:
        print(f"stepdbg: session {server.info.id} listening; attach with: {server.attach_command}",  # type: ignore[union-attr]
              file=sys.stderr, flush=True)
    return server
