"""Running the app: on a job it launches (`stepdbg python train.py` at a terminal) or
on one it attaches to (`stepdbg attach TARGET`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from stepdbg.client import Endpoint, TargetError
from stepdbg.client.async_client import AsyncClient
from stepdbg.client.job import EndedReport, TorchrunLog
from stepdbg.wire import sessions

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
    app = StepdbgApp(client, reconnect=lambda: _open(target, token, ranks, torchrun))
    hold["app"] = app
    app.log_buffer.extend(output or [])  # what the job printed before the UI came up
    try:
        choice = await app.run_async()
    finally:
        hold["app"] = None
    source = app.source  # the source in use (after a reconnect, a new one)
    if choice == "end" and source.exited is None:
        with contextlib.suppress(Exception):
            await source.end()
            deadline = time.monotonic() + END_TIMEOUT
            while source.exited is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
    ended = source.exited  # (closing makes it "lost")
    await source.close(then=choice or "stay")
    return choice, source, ended


def attach_tui(target: str | None, token: str | None, ranks: Ranks | None = None, again: str = "") -> int:
    """`stepdbg attach` with the TUI (on one process, or on every rank of a job): says what
    became of the job, as the line console does; the job's exit code when it ended."""
    choice, source, ended = asyncio.run(_run(target, token, None, {}, ranks))
    if ended is not None and "lost" not in ended:
        print(f"the job ended with exit code {ended.get('exit_code')}", file=sys.stderr)
        return int(ended.get("exit_code") or 0)
    if ended is not None:
        print(f"stepdbg: {ended['lost']}", file=sys.stderr)
        return 1
    again = again or f"stepdbg attach {source.session.get('id')}"
    now = "stays paused" if choice == "stay" and source.paused is not None else "goes on"
    print(f"detached; the job {now}: `{again}` comes back", file=sys.stderr)
    return 0


def launch_tui(cmd: list[str], env: dict[str, str], ranks: int | None = None) -> int:  # noqa: C901, PLR0915 - launch, relay the job's output, and end the job as the user chose: one sequence
    """Start the job as a child with the agent serving, show the TUI, relay its output.

    The child's stdout/stderr go to the Log panel while the UI runs and to this terminal
    after it closes (nothing is lost); the child's exit code is returned."""
    child = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, errors="replace", bufsize=1)
    output: list[tuple[str, str]] = []
    hold: dict[str, Any] = {"app": None}
    lock = threading.Lock()
    torchrun = TorchrunLog()  # exit codes and each rank's last lines, from torchrun's output
    ended = EndedReport()  # torchrun's failure report for a job ended from the TUI, in one line

    def show(name: str, line: str) -> None:
        for shown in ended.feed(line) if name == "stderr" else [line]:
            print(shown, file=sys.stdout if name == "stdout" else sys.stderr, flush=True)

    def relay(stream: Any, name: str) -> None:
        for line in stream:
            line = line.rstrip("\n")
            if ranks:
                torchrun.feed(line)
            with lock:
                app = hold.get("app")
                if app is None:
                    output.append((name, line))
                    if hold.get("done"):
                        show(name, line)
                    continue
            from .messages import JobEvent

            app.post_message(JobEvent("output", [{"stream": name, "lines": [line]}]))
            output.append((name, line))

    readers = [threading.Thread(target=relay, args=(child.stdout, "stdout"), daemon=True),
               threading.Thread(target=relay, args=(child.stderr, "stderr"), daemon=True)]
    for r in readers:
        r.start()
    again = "stepdbg attach"  # what attaches to this job again
    left = None  # how the user left the TUI: "continue", "stay" (paused) or "end"
    try:
        if ranks:
            job = _wait_for_ranks(child, ranks)
            if job:
                endpoints = [Endpoint(s.reach, s.token) for s in job]
                left, _, _ = asyncio.run(_run(None, None, list(output), hold, lambda: endpoints, torchrun))
                ended.ended = left == "end"
                ended.auto = True  # left running or paused: a client may end it later (attach, q, e)
        else:
            info = _wait_for_session(child)
            if info is not None:
                again = f"stepdbg attach {info.id}"
                left, _, _ = asyncio.run(_run(str(info.pid), None, list(output), hold))
    except KeyboardInterrupt:  # before the TUI is up: the terminal's Ctrl-C reached the job too
        left = "ctrl-c"  # (one process group), which handles it as it would plain; stepdbg waits for it
    except TargetError as e:
        print(f"stepdbg: {e}", file=sys.stderr)
    finally:
        with lock:
            hold["done"] = True
            hold["app"] = None
            for name, line in output:  # the whole log, on the terminal once the UI is gone
                show(name, line)
    if child.poll() is None and left not in ("end", "ctrl-c"):
        now = "stays paused" if left == "stay" else "goes on"
        print(f"stepdbg: the job {now} without the TUI (pid {child.pid}): `{again}` attaches again; "
              "Ctrl-C interrupts it (its own Ctrl-C handling runs)", file=sys.stderr, flush=True)
    code = _wait_through_ctrl_c(child)
    for r in readers:
        r.join(timeout=5)
    if ended.hid:  # torchrun's 1 for ranks that ended as asked: the job's own code
        return ended.code
    return code if code >= 0 else 128 - code  # killed by a signal: 128 + its number, as a shell says


def _wait_through_ctrl_c(child: subprocess.Popen[str]) -> int:
    """Wait for the job. Ctrl-C at the terminal reaches the job itself (it is in this
    process group): stepdbg waits while it runs its own handling and writes its report's
    end, and keeps relaying its output, instead of dying first with a traceback."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)


def _wait_for_session(child: subprocess.Popen[str]) -> sessions.SessionInfo | None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        for s in sessions.listing():
            if s.pid == child.pid:
                return s
        if child.poll() is not None:
            return None  # it ended before it could be attached to; its output says why
        time.sleep(0.05)
    raise TargetError(f"the job (pid {child.pid}) did not start its agent in {START_TIMEOUT:g}s")


def _wait_for_ranks(child: subprocess.Popen[str], ranks: int) -> list[sessions.SessionInfo] | None:
    """The sessions of the job torchrun started (the ranks are its grandchildren)."""
    before = {s.pid for s in sessions.listing()}
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        new = [s for s in sessions.listing() if s.pid not in before and s.job_id and s.world_size == ranks]
        if len(new) == ranks:
            return sorted(new, key=lambda s: s.rank or 0)
        if child.poll() is not None:
            return None
        time.sleep(0.1)
    raise TargetError(f"the job's {ranks} ranks did not start their agents in {START_TIMEOUT:g}s")
