"""Running the app: on a job it launches (`stepdbg python train.py` at a terminal) or
on one it attaches to (`stepdbg attach TARGET`).

A launched job outlives its launcher: it runs in a session of its own (no terminal, so a
closing window's SIGHUP and signals to this process group miss it), and its stdout and
stderr reach this process through the keeper (stepdbg.launch.keeper), which writes them
to a file once this process is gone. The terminal's Ctrl-C, which reached the job
directly when both shared a process group, is passed on to the job's process group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from stepdbg.client import Endpoint, TargetError
from stepdbg.client.async_client import AsyncClient
from stepdbg.client.connection import gone_words, lost_words
from stepdbg.client.ended_report import EndedReport
from stepdbg.client.job import TORCHRUN_LOGS, TorchrunLog
from stepdbg.launch import keeper
from stepdbg.wire import sessions
from stepdbg.wire.fold import OwnLines, for_terminal

from .launch_ctrl_c import CtrlC, drop_typed, wait_through_ctrl_c
from .rank_order import SAID, RankOrder, source_of
from .stream_order import StdoutFirst

START_TIMEOUT = 120.0
END_TIMEOUT = 60.0  # seconds a job ended from the TUI has to say its exit code


Ranks = Callable[[], list[Endpoint]]  # finds every rank of a job again (for a reconnect too)


async def _open(target: str | None, token: str | None, ranks: Ranks | None, torchrun: TorchrunLog | None = None) -> Any:
    if ranks is None:
        return await AsyncClient.connect(target, token=token)
    from .job_source import JobSource

    clients: list[AsyncClient] = []
    endpoints = await asyncio.to_thread(ranks)  # ssh listings block: off the loop
    try:
        for ep in endpoints:
            clients.append(await AsyncClient.connect_endpoint(ep))
    except BaseException:
        await asyncio.gather(*(c.close() for c in clients))
        for ep in endpoints[len(clients) + 1:]:
            if ep.close is not None:
                ep.close()
        raise
    return JobSource(clients, torchrun)


async def _run(target: str | None, token: str | None, output: list[tuple[str, str]] | None,
               hold: dict[str, Any], ranks: Ranks | None = None, torchrun: TorchrunLog | None = None
               ) -> tuple[str | None, Any, dict[str, Any] | None]:
    """The TUI until the user leaves: how they left (continue, stay, end; None once the job
    ended), the source (closed) and the job's end as known before leaving (its `exited`).
    Ending, it waits (bounded) for the job's end to know its code."""
    from .app import StepdbgApp

    client = await _open(target, token, ranks, torchrun)
    app = StepdbgApp(client)

    async def reconnect() -> Any:
        """The same job again (its session id, not whichever one is running now), or why not:
        a job that is gone is said to be gone (ctrl+r after a kill -9 said `no stepdbg session
        is running here`)."""
        if ranks is not None:
            return await _open(target, token, ranks, torchrun)
        session = app.source.session
        gone = _gone(session, hold.get("child"))
        if gone is not None:
            raise TargetError(gone)
        again = str(session["id"]) if target is None and session.get("id") else target
        return await _open(again, token, ranks, torchrun)

    app.reconnect = reconnect
    hold["app"] = app
    if hold.get("ctrl_c") is not None:
        hold["ctrl_c"].showing(app)
    app.log_buffer.extend(output or [])  # what the job printed before the UI came up
    app.output_shown = output is not None  # a job started here: its output comes to the Log
    app.output_ended = hold.get("output_ended")  # (its end: the job's last lines come before the end's)
    app.child = hold.get("child")  # (its end when the connection goes: a kill -9 lets its agent say nothing)
    try:
        drop_typed()  # (keys typed before it, at the start or at the relay: not its)
        choice = await app.run_async()
    finally:
        hold["app"] = None
    source = app.source  # the source in use (after a reconnect, a new one)
    if choice == "ctrl-c":  # the terminal's Ctrl-C before the TUI had it: the job handles it
        choice = None
    if choice == "end" and source.exited is None:
        with contextlib.suppress(Exception):
            await source.end(by="tui")
            deadline = time.monotonic() + END_TIMEOUT
            while source.exited is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
    ended = source.exited  # (closing makes it "lost")
    if choice == "stay" and ended is None:  # left as it is: paused or not, as the job says (a resume it
        with contextlib.suppress(Exception):  # refused, n at an exception, made the client forget its pause,
            source.paused = (await source.status()).get("paused")  # and `goes on` was said of it: walk 10)
    await source.close(then=choice or "stay")
    return choice, source, ended


def _gone(session: dict[str, Any], child: subprocess.Popen[Any] | None) -> str | None:
    """The job is gone: how it ended where this process launched it (killed by SIGKILL, exit
    code 137), else that its process has ended; None while it runs (or runs elsewhere)."""
    if child is not None and child.poll() is not None:
        from .job_events import ended_words

        return f"the job (pid {child.pid}) {ended_words(child.returncode)}: nothing to reconnect to"
    gone = gone_words(session)
    return None if gone is None else f"{gone}: nothing to reconnect to"


def attach_tui(target: str | None, token: str | None, ranks: Ranks | None = None, again: str = "") -> int:
    """`stepdbg attach` with the TUI (on one process, or on every rank of a job): says what
    became of the job, as the line console does; the job's exit code when it ended."""
    choice, source, ended = asyncio.run(_run(target, token, None, {}, ranks))
    if ended is not None and "lost" not in ended:
        print(f"the job ended with exit code {ended.get('exit_code')}", file=sys.stderr)
        return int(ended.get("exit_code") or 0)
    if ended is not None:
        print(f"stepdbg: {lost_words(source.session, ended['lost'])}", file=sys.stderr)
        return 1
    again = again or f"stepdbg attach {source.session.get('id')}"
    now = "stays paused" if choice == "stay" and source.paused is not None else "goes on"
    print(f"detached; the job {now}: `{again}` comes back", file=sys.stderr)
    return 0


def launch_tui(cmd: list[str], env: dict[str, str], ranks: int | None = None) -> int:
    """Start the job as a child with the agent serving, show the TUI, relay its output.

    The child's stdout/stderr go to the Log panel while the UI runs and to this terminal
    after it closes (nothing is lost); the child's exit code is returned. If this process
    fails, the job goes on (as when it is killed), and the traceback is followed by where."""
    ctrl_c = CtrlC()
    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        # One process (not torchrun, whose own handling must get it): the job starts with Ctrl-C
        # blocked, and its agent takes it once it can hold it; Python's start, interrupted,
        # says "Fatal Python error: init_import_site" and a traceback of its own (exit 1).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if ranks is None else None
        try:
            child, kept, streams = _start(cmd, env)
            ctrl_c.child = child
        finally:
            if blocked is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        try:
            return _launched(child, kept, streams, ranks, ctrl_c)
        except Exception:
            if child.poll() is None:
                traceback.print_exc()
                print(f"stepdbg: the job goes on without stepdbg (pid {child.pid}; `stepdbg ls` lists it, `stepdbg "
                      f"attach` reaches it); its output goes to {keeper.output_path(child.pid)}", file=sys.stderr,
                      flush=True)
                return 1
            raise
    finally:
        signal.signal(signal.SIGINT, previous)


def _launched(child: subprocess.Popen[Any], kept: subprocess.Popen[str] | None,  # noqa: C901, PLR0912, PLR0915 - relay the job's output, and end the job as the user chose: one sequence
              streams: tuple[IO[str], IO[str]], ranks: int | None, ctrl_c: CtrlC) -> int:
    output: list[tuple[str, str]] = []
    hold: dict[str, Any] = {"app": None}
    lock = threading.Lock()
    unread = {"stdout", "stderr"}  # the streams still open: the job's output is all read once none is
    hold["output_ended"] = threading.Event()
    hold["child"] = None if ranks else child  # (torchrun's end is not a rank's)
    torchrun = TorchrunLog()  # exit codes and each rank's last lines, from torchrun's output
    ended = EndedReport()  # torchrun's failure report for a job ended from the TUI, in one line
    folded = EndedReport(auto=bool(ranks))  # ...in the TUI's Log: after its Ctrl-C, or another client's end (q at attach)
    mine = OwnLines()  # which relayed stderr lines are stepdbg's (a message's later lines too)

    def show(name: str, line: str) -> None:  # (stepdbg's own lines folded between words at a terminal, the job's as written)
        ended.interrupted = ended.interrupted or bool(ranks) and ctrl_c.pressed.is_set()  # (torchrun's own traceback)
        for shown in ended.feed(line) if name == "stderr" else [line]:
            writer, text = source_of(name, shown)
            own = name == "stderr" and mine.own(writer, text)
            print(for_terminal(shown, sys.stderr, len(shown) - len(text)) if own else shown,
                  file=sys.stdout if name == "stdout" else sys.stderr, flush=True)

    def deliver(name: str, line: str) -> None:  # (under the lock)
        output.append((name, line))
        app = hold.get("app")
        if app is None:
            if hold.get("done"):
                show(name, line)
            return
        from .messages import JobEvent

        folded.interrupted = folded.interrupted or bool(ranks and getattr(app, "interrupted", False))
        for shown in folded.fold(line) if name == "stderr" else [line]:  # (torchrun's report of ranks
            app.post_message(JobEvent("output", [{"stream": name, "lines": [shown]}]))  # ended by its Ctrl-C: a line)

    log_dir = _option(child.args, "--log-dir") if ranks and isinstance(child.args, list) else None
    if log_dir is not None and not os.path.basename(log_dir).startswith(TORCHRUN_LOGS):
        log_dir = None  # the user's own (it is not ours to read, nor to remove)
    order = RankOrder(log_dir, deliver, lock, torchrun) if log_dir else None  # each rank's lines in the order it wrote them

    first = StdoutFirst(lock, streams[0])  # a one-process job's stdout lines before the event line after them

    def relay(stream: Any, name: str) -> None:
        if name == "stdout" and not ranks:
            first.read(lambda line: deliver(name, line))
        for line in stream if ranks or name == "stderr" else ():
            line = line.rstrip("\n")
            if ranks:
                torchrun.feed(line)
            with lock:
                if not ranks and SAID.match(line):
                    first.wait_for_stdout()
                (order.feed if order is not None else deliver)(name, line)
        with lock:
            unread.discard(name)
            if not unread:
                if order is not None:
                    order.release_all()
                hold["output_ended"].set()

    readers = [threading.Thread(target=relay, args=(streams[0], "stdout"), daemon=True),
               threading.Thread(target=relay, args=(streams[1], "stderr"), daemon=True)]
    for r in readers:
        r.start()
    again = "stepdbg attach"  # what attaches to this job again
    left = None  # how the user left the TUI: "continue", "stay" (as it is) or "end"
    paused = False  # the job was paused when the TUI closed (left "stay": it stays paused, else runs on)
    hold["ctrl_c"] = ctrl_c
    try:
        if ranks:
            job = _wait_for_ranks(child, ranks, ctrl_c.pressed)
            if job and not ctrl_c.pressed.is_set():
                endpoints = [Endpoint(s.reach, s.token) for s in job]
                left, source, _ = asyncio.run(_run(None, None, list(output), hold, lambda: endpoints, torchrun))
                paused = source.paused is not None
                ended.ended = left == "end"
                ended.auto = True  # left running or paused: a client may end it later (attach, q, e)
        else:
            info = _wait_for_session(child, ctrl_c.pressed)
            if info is not None and not ctrl_c.pressed.is_set():
                again = f"stepdbg attach {info.id}"
                left, source, _ = asyncio.run(_run(str(info.pid), None, list(output), hold))
                paused = source.paused is not None
    except Exception as e:
        if not ctrl_c.pressed.is_set():  # (after a Ctrl-C the job ends: its socket may go while the TUI connects)
            if not isinstance(e, TargetError):
                raise
            print(f"stepdbg: {e}", file=sys.stderr)
    finally:
        with lock:
            hold["done"] = True
            hold["app"] = None
            ended.interrupted = folded.interrupted
            for name, line in output:  # the whole log, on the terminal once the UI is gone
                show(name, line)
    if ctrl_c.pressed.is_set():  # the terminal's Ctrl-C went on to the job, which handles it as it
        left = "ctrl-c"  # would plain; stepdbg waits for it
    if child.poll() is None and left not in ("end", "ctrl-c"):
        now = "stays paused" if left == "stay" and paused else "goes on"  # (l of a job running: it ran on)
        print(for_terminal(f"stepdbg: the job {now} without the TUI (pid {child.pid}): `{again}` attaches again; "
                           "Ctrl-C interrupts it (its own Ctrl-C handling runs)", sys.stderr), file=sys.stderr, flush=True)
    code = wait_through_ctrl_c(child)
    sessions.sweep()  # a job killed -9, or a rank torchrun killed, left its session files
    _drain(readers, kept)
    if log_dir is not None:
        shutil.rmtree(log_dir, ignore_errors=True)  # torchrun's copies of the ranks' output (relayed)
    if code < 0 and left != "ctrl-c":  # (a kill -9 lets the job say nothing: said here, after its last lines)
        from .job_events import ended_words

        print(f"stepdbg: the job (pid {child.pid}) was {ended_words(code)}", file=sys.stderr, flush=True)
    if ended.hid:  # torchrun's 1 for ranks that ended as asked: the job's own code
        return ended.code
    return code if code >= 0 else 128 - code  # killed by a signal: 128 + its number, as a shell says


def _option(args: list[str], name: str) -> str | None:
    """The value of option `name` in a command line (`--log-dir DIR`), or None."""
    return next((args[i + 1] for i, a in enumerate(args[:-1]) if a == name), None)


def _drain(readers: list[threading.Thread], kept: subprocess.Popen[str] | None) -> None:
    """The job's last lines, relayed. A keeper still running past that serves something the
    job started that holds its output: once this process ends, that goes to the file."""
    for r in readers:
        r.join(timeout=5)
    if kept is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            kept.wait(timeout=1)


Started = tuple[subprocess.Popen[Any], subprocess.Popen[str] | None, tuple[IO[str], IO[str]]]


def _start(cmd: list[str], env: dict[str, str]) -> Started:
    """The job, in a session of its own; the keeper; the streams the job's stdout and stderr
    reach this process by: the keeper's, which outlive this process. The keeper's stdin
    stays open while this process lives: its end tells the keeper that the launcher is
    gone. (If the keeper cannot start, the job's own pipes: the job then depends on this
    process again, as it did before.)"""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child: subprocess.Popen[Any] = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out_w,
                                                        stderr=err_w, start_new_session=True)
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    try:
        kept = subprocess.Popen([sys.executable, "-I", "-S", keeper.__file__, str(out_r), str(err_r),
                                 keeper.output_path(child.pid)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, pass_fds=(out_r, err_r), start_new_session=True,
                                text=True, errors="replace", bufsize=1)
    except OSError:
        return child, None, (open(out_r, errors="replace"), open(err_r, errors="replace"))  # noqa: SIM115 - read to EOF by the relay threads
    os.close(out_r)
    os.close(err_r)
    assert kept.stdout is not None and kept.stderr is not None
    return child, kept, (kept.stdout, kept.stderr)


def _wait_for_session(child: subprocess.Popen[Any], stop: threading.Event) -> sessions.SessionInfo | None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and not stop.is_set():
        for s in sessions.listing():
            if s.pid == child.pid:
                return s
        if child.poll() is not None:
            return None  # it ended before it could be attached to; its output says why
        stop.wait(0.05)
    if stop.is_set():
        return None
    raise TargetError(f"the job (pid {child.pid}) did not start its agent in {START_TIMEOUT:g}s")


def _wait_for_ranks(child: subprocess.Popen[Any], ranks: int, stop: threading.Event
                    ) -> list[sessions.SessionInfo] | None:
    """The sessions of the job torchrun started (the ranks are its grandchildren)."""
    before = {s.pid for s in sessions.listing()}
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and not stop.is_set():
        new = [s for s in sessions.listing() if s.pid not in before and s.job_id and s.world_size == ranks]
        if len(new) == ranks:
            return sorted(new, key=lambda s: s.rank or 0)
        if child.poll() is not None:
            return None
        stop.wait(0.1)
    if stop.is_set():
        return None
    raise TargetError(f"the job's {ranks} ranks did not start their agents in {START_TIMEOUT:g}s")
