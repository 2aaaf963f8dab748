"""The agent's server: one listener thread, one thread per client, token first.

By default it listens on a Unix socket in the per-user runtime directory (0700), so
file permissions keep other local users out; TCP only when asked (``--listen``,
127.0.0.1 unless a host is given). Every connection must present the session's token
within AUTH_TIMEOUT seconds or it is closed. A client that sends garbage, vanishes or
never speaks changes nothing for the job.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..wire import protocol, sessions

if TYPE_CHECKING:
    from .session import Session

STEP_EVENTS_PER_SECOND = 10
EVAL_OUTPUT_LIMIT = 1_000_000


class Handlers:
    """Every request a client may make, as ``op_<name>``; each returns plain data."""

    def __init__(self, session: Session, server: Server, conn: protocol.Connection) -> None:
        self.s = session
        self.server = server
        self.conn = conn

    # state and breakpoints
    def op_status(self) -> dict[str, Any]:
        return self.s.status()

    def op_job_nodes(self) -> dict[str, Any]:
        """The node of every rank of this distributed job, from the job's store."""
        return {"world_size": self.s.ranks.world(), "nodes": self.s.ranks.nodes()}

    def op_breaks(self) -> list[str]:
        return [c.spec for c in self.s.conditions]

    def op_break_add(self, spec: str) -> list[str]:
        from ..wire.conditions import ConditionError

        try:
            self.s.add_break(spec)
        except ConditionError as e:
            raise protocol.ProtocolError("bad_args", str(e)) from None
        return self.op_breaks()

    def op_breakpoints(self) -> list[dict[str, Any]]:
        return self.s.breakpoints()

    def op_break_enable(self, spec: str, enabled: bool = True) -> list[dict[str, Any]]:
        try:
            self.s.enable_break(spec, bool(enabled))
        except KeyError as e:
            raise protocol.ProtocolError("bad_args", str(e.args[0])) from None
        return self.s.breakpoints()

    def op_break_remove(self, spec: str) -> list[str]:
        try:
            self.s.remove_break(spec)
        except KeyError as e:
            raise protocol.ProtocolError("bad_args", str(e.args[0])) from None
        return self.op_breaks()

    # stepping
    def op_cont(self) -> None:
        self.s.cont()

    def op_pause(self) -> None:
        self.s.pause()

    def op_next_phase(self) -> None:
        self.s.next_phase()

    def op_next_step(self) -> None:
        self.s.next_step()

    def op_pause_at(self, n: int) -> None:
        self.s.pause_at(int(n))

    def op_run_to_step(self, n: int) -> None:
        self.s.run_to_step(int(n))

    def op_end(self) -> None:
        self.s.end()

    def op_detach(self, then: str = "stay") -> None:
        if then not in ("stay", "continue", "end"):
            raise protocol.ProtocolError("bad_args", f"then must be stay, continue or end, not {then!r}")
        self.server.detach_then[id(self.conn)] = then

    # inspection
    def op_summary(self, name: str) -> dict[str, Any]:
        return self.s.summary(name)

    def op_slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        return self.s.slice(name, index, limit)

    def op_module_tree(self) -> list[dict[str, Any]]:
        return self.s.module_tree()

    def op_model_summary(self, depth: int = 3) -> str | None:
        return self.s.model_summary(int(depth))

    def op_optimizer(self) -> list[dict[str, Any]]:
        return self.s.optimizer_info()

    def op_memory(self) -> dict[str, Any]:
        return self.s.memory()

    def op_timings(self) -> dict[str, Any]:
        return self.s.timings()

    def op_history(self, last: int = 200) -> list[dict[str, Any]]:
        return list(self.s.history)[-int(last):]

    def op_source(self, context: int = 5) -> dict[str, Any] | None:
        return self.s.source(int(context))

    def op_stacks(self) -> list[dict[str, Any]]:
        return self.s.stacks()

    def op_replay(self) -> dict[str, Any]:
        return self.s.replay()

    def op_eval(self, source: str) -> dict[str, Any]:
        r = self.s.evaluate(source)
        if len(r["output"]) > EVAL_OUTPUT_LIMIT:
            cut = len(r["output"]) - EVAL_OUTPUT_LIMIT
            r["output"] = r["output"][:EVAL_OUTPUT_LIMIT] + f"\n[stepdbg: {cut} more characters not shown]\n"
        return r

    # changes
    def op_set_lr(self, lr: float, group: int | None = None, pin: bool = False) -> dict[str, Any]:
        return self.s.set_lr(lr, group=group, pin=pin)

    def op_set_param_group(self, key: str, value: float, group: int | None = None) -> dict[str, Any]:
        return self.s.set_param_group(key, value, group=group)

    def op_skip(self) -> dict[str, Any]:
        return self.s.skip_step()


class Server:
    """Serves one session; start() returns once it listens and the session file exists."""

    def __init__(self, session: Session, listen: str | None = None) -> None:
        self.session = session
        self.listen = listen
        self.token = secrets.token_hex(32)
        self.info: sessions.SessionInfo | None = None
        self.detach_then: dict[int, str] = {}
        self._probes: set[int] = set()
        self._sock: socket.socket | None = None
        self._clients: set[protocol.Connection] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._latest_step: dict[str, Any] | None = None
        self._output: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Server:
        if self.listen:
            host, _, port = self.listen.rpartition(":")
            host = host or "127.0.0.1"
            sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host.strip("[]"), int(port or 0)))
            address = f"{host}:{sock.getsockname()[1]}"
        else:
            d = sessions.ensure_private_dir(sessions.runtime_dir())
            address = os.path.join(d, f"{os.getpid()}.sock")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            old = os.umask(0o177)
            try:
                sock.bind(address)
            finally:
                os.umask(old)
        sock.listen(16)
        self._sock = sock
        s = self.session
        self.info = sessions.SessionInfo(
            id=str(os.getpid()), pid=os.getpid(), host=sessions.node_name(), argv=s.argv,
            address=address, token=self.token, started=time.time(),
            rank=_env_int("RANK"), local_rank=_env_int("LOCAL_RANK"), world_size=_env_int("WORLD_SIZE"),
            job_id=os.environ.get("TORCHELASTIC_RUN_ID") or os.environ.get("SLURM_JOB_ID"),
        )
        sessions.write(self.info)
        s.listeners.append(self._on_session_event)
        for target, name in ((self._accept_loop, "stepdbg-server"), (self._step_flusher, "stepdbg-steps")):
            threading.Thread(target=target, name=name, daemon=True).start()
        return self

    def stop(self, exit_code: int | None = None, error: str | None = None) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._flush_output()
        self.broadcast(protocol.event("exited", {"exit_code": exit_code, "steps": self.session.step, "error": error}))
        with self._lock:
            clients = list(self._clients)
        for c in clients:
            c.close()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        if self.info is not None:
            sessions.remove(self.info)

    @property
    def attach_command(self) -> str:
        assert self.info is not None
        return f"stepdbg attach {self.info.id if not self.listen else self.info.address}"

    # ------------------------------------------------------------------ events

    def _on_session_event(self, name: str, data: Any) -> None:
        if name == "step":
            self._latest_step = data  # coalesced: at most STEP_EVENTS_PER_SECOND go out
            return
        if name == "output":
            with self._lock:
                self._output.append(data)  # batched by the flusher
            return
        if name == "paused":
            data = asdict(data)
        self.broadcast(protocol.event(name, data))

    def _step_flusher(self) -> None:
        sent = None
        while not self._stopped.wait(1 / STEP_EVENTS_PER_SECOND):
            self._flush_output()
            latest = self._latest_step
            if latest is not None and latest is not sent and self._clients:
                self.broadcast(protocol.event("step", latest))
                sent = latest

    def _flush_output(self) -> None:
        with self._lock:
            batch, self._output = self._output, []
        if batch and self._clients:
            self.broadcast(protocol.event("output", batch))

    def broadcast(self, message: dict[str, Any]) -> None:
        with self._lock:
            clients = list(self._clients)
        for c in clients:
            try:
                c.send(message)
            except OSError:
                self._drop(c)

    # ------------------------------------------------------------------ connections

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopped.is_set():
            try:
                sock, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), name="stepdbg-client", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        conn = protocol.Connection(sock)
        try:
            role = self._handshake(conn)
            if role is None:
                return
            with self._lock:
                self._clients.add(conn)
            if role == "probe":  # stepdbg ls: not a front end
                self._probes.add(id(conn))
            else:
                self.session.attach()
            dispatcher = protocol.Dispatcher(Handlers(self.session, self, conn))
            while not self._stopped.is_set():
                try:
                    msg = conn.recv(timeout=None)
                except protocol.ProtocolError as e:
                    # The stream cannot be trusted past a bad frame: say why, then hang up.
                    self._safe_send(conn, protocol.error(None, e.code, e.message))
                    return
                if msg is None:
                    return
                self._safe_send(conn, dispatcher.handle(msg))
        except OSError:
            return
        except Exception as e:  # never let a client take the job down
            self.session.say(f"client connection failed: {type(e).__name__}: {e}")
        finally:
            was_client = self._drop(conn)
            conn.close()
            then = self.detach_then.pop(id(conn), "stay")
            probe = id(conn) in self._probes
            self._probes.discard(id(conn))
            if was_client and not probe:
                self.session.detach(then)

    def _handshake(self, conn: protocol.Connection) -> str | None:
        """The client's role ("frontend" or "probe") once its token is right, else None."""
        try:
            msg = conn.recv(timeout=float(os.environ.get("STEPDBG_AUTH_TIMEOUT", protocol.AUTH_TIMEOUT)))
        except TimeoutError:
            self._safe_send(conn, protocol.error(None, "auth", "no hello with the session token in time"))
            return None
        except protocol.ProtocolError as e:
            self._safe_send(conn, protocol.error(None, e.code, e.message))
            return None
        if msg is None:
            return None
        if msg.get("type") != "hello":
            self._safe_send(conn, protocol.error(None, "auth", "the first message must be a hello with the token"))
            return None
        if msg.get("version") != protocol.VERSION:
            self._safe_send(conn, protocol.error(
                None, "version", f"this agent speaks protocol {protocol.VERSION}, not {msg.get('version')!r}"))
            return None
        token = msg.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.token.encode()):
            self._safe_send(conn, protocol.error(None, "auth", "wrong token"))
            return None
        assert self.info is not None
        conn.send({"type": "welcome", "version": protocol.VERSION, "session": self.info.public(),
                   "status": protocol.plain(self.session.status())})
        return "probe" if msg.get("role") == "probe" else "frontend"

    def _safe_send(self, conn: protocol.Connection, message: dict[str, Any]) -> None:
        try:
            conn.send(message)
        except (OSError, protocol.ProtocolError):
            pass

    def _drop(self, conn: protocol.Connection) -> bool:
        with self._lock:
            was = conn in self._clients
            self._clients.discard(conn)
        return was


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    return int(v) if v and v.isdigit() else None


def serve(session: Session, listen: str | None = None, announce: bool = True) -> Server:
    """Start serving `session`; with `announce`, print the attach command on stderr."""
    server = Server(session, listen).start()
    session.server = server
    if announce:
        print(f"stepdbg: session {server.info.id} listening; attach with: {server.attach_command}",  # type: ignore[union-attr]
              file=sys.stderr, flush=True)
    return server
