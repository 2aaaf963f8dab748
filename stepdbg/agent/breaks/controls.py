"""Controls: the pause/resume state machine and the work handed to the paused thread.

The training thread pauses in ``hold()`` and runs, one at a time, the calls other
threads queue with ``on_training_thread()`` (evaluating code in the paused frame,
replaying the step: grad mode, autocast and the device are per thread) until a resume
arrives. Resuming ops set the run mode that ``stop_reason()`` reads at the next pause
points. Front ends are counted here, since whether anyone is attached decides what a
pause waits for.
"""

from __future__ import annotations

import functools
import os
import queue
import signal
import threading
import time
import types
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from stepdbg.agent.measure.frames import SELECTOR
from stepdbg.wire import conditions as cond_mod
from stepdbg.wire.ops import ENDED_BY
from stepdbg.wire.protocol import NotPaused

__all__ = ["EXIT_ABORT", "Abort", "ActionHooks", "Break", "Controls", "NotPaused"]


@dataclass
class Break:
    """Why and where the job stopped."""

    step: int
    phase: str
    condition: str
    reason: str
    scalars: dict[str, Any]
    where: dict[str, Any] | None
    details: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)  # wall clock, for latency and logs
    conditions: list[str] = field(default_factory=list)  # every condition that held at this pause point


EXIT_ABORT = 3


@dataclass
class ActionHooks:
    """What the actions call outside the breaks: set by the Session when it wires the parts."""

    replay: Callable[[bool], Any]  # alone: True, the rank that broke alone; False, every rank together
    sharded: Callable[[], bool]  # the model's parameters are sharded across ranks (its forward gathers them)
    save: Callable[[], Any]  # the evidence bundle
    skip: Callable[[], Any]
    rewind: Callable[[Break], None]
    console: Callable[[], None] | None  # the console at the job's terminal, when there is one
    can_prompt: Callable[[], bool]
    attach_command: Callable[[], str]
    stop: Callable[..., None]  # the Session's stop(exit_code): a stalled job that aborts ends here


class Abort(SystemExit):
    """Raised into the training loop by the `abort` action: ends the script with code 3."""

    def __init__(self) -> None:
        super().__init__(EXIT_ABORT)


class Controls:
    """Pause, resume and stepping; the call queue of the paused training thread."""

    def __init__(self, training_thread: Callable[[], int | None]) -> None:
        self._training_thread = training_thread
        self.paused: Break | None = None
        self.end_requested = False
        self.end_asked_by = ENDED_BY["client"]  # who asked, as the job says it ends
        self.frontends = 0
        self.wait_for_frontend = False  # serve mode: a pause waits for a client to attach
        self.detach_timeout: float | None = None
        self.alone_since: float | None = None
        self._resume = threading.Event()
        self._calls: queue.Queue[tuple[Callable[[], Any], Future[Any]]] = queue.Queue()
        self.free = True  # running free: no stepping mode, no end asked for (read at every pause point)
        self._run_mode = ("run", None)
        self._paused_cv = threading.Condition()
        self.on_interrupt: Callable[[], Any] = lambda: None  # told before a front end's Ctrl-C (the Breaker's change)
        self._signalled: BaseException | None = None  # the job's own signal handler raised it in a request

    @property
    def _run_mode(self) -> tuple[str, Any]:
        return self._mode

    @_run_mode.setter
    def _run_mode(self, mode: tuple[str, Any]) -> None:
        self._mode = mode
        self.free = mode[0] == "run" and not self.end_requested

    # ------------------------------------------------------------------ on the training thread

    def begin_pause(self, brk: Break) -> None:
        self._resume.clear()
        self._run_mode = ("run", None)
        with self._paused_cv:
            self.paused = brk
            self._paused_cv.notify_all()

    def end_pause(self) -> None:
        with self._paused_cv:
            self.paused = None
            self._paused_cv.notify_all()

    def hold(self, on_idle: Callable[[], None] | None = None) -> None:
        """Run queued requests on the training thread until someone resumes."""
        try:
            while not self._resume.is_set():
                try:
                    fn, fut = self._calls.get(timeout=0.1)
                except queue.Empty:
                    alone = self.alone_since
                    if (self.detach_timeout is not None and alone is not None and self.frontends == 0
                            and time.monotonic() - alone > self.detach_timeout and on_idle is not None):
                        on_idle()
                    continue
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn())
                    except BaseException as e:  # handed back to the caller
                        fut.set_exception(e)
                        if isinstance(e, KeyboardInterrupt):  # a Ctrl-C for the job, not for the request
                            raise
                    self._raise_signalled()
        finally:  # resumed, or a Ctrl-C (SIGINT) ended the pause: the job's own handling runs
            # Anything left unanswered is cancelled, never silently lost.
            while not self._calls.empty():
                _, fut = self._calls.get_nowait()
                fut.set_exception(NotPaused("the job resumed before this request ran"))

    def stop_reason(self, phase: str, step: int) -> str | None:
        """Why the run mode stops at this pause point, if it does."""
        mode, arg = self._run_mode
        if mode == "phase" and arg != (step, phase):  # (not the one it left: a pause for a rank's break
            return f"paused at the next pause point ({phase})"  # is held just before its own pause point)
        if mode == "step" and step >= arg[0] and (phase == arg[1] or arg[1] not in cond_mod.PHASES):
            return f"next step: step {step}"
        if mode == "to_step" and step >= arg:
            return f"ran to step {step}"
        return None

    # ------------------------------------------------------------------ from any thread

    def on_training_thread(self, fn: Callable[[], Any], timeout: float = 300.0) -> Any:
        """Run `fn` on the paused training thread and return its result."""
        me = threading.current_thread()
        thread = self._training_thread()
        if me.ident == thread or (thread is None and not me.name.startswith("stepdbg-")):
            result = fn()  # the training thread itself (the console), or nothing trains yet
            self._raise_signalled()
            return result
        if self.paused is None:
            raise NotPaused("the job is running; pause it first")
        fut: Future[Any] = Future()
        self._calls.put((functools.partial(_as_selector, SELECTOR.get(), fn), fut))  # (the asking client's frame)
        return fut.result(timeout=timeout)

    def held_signal(self, e: BaseException) -> bool:
        """Whether `e`, caught in code run at the pause (an eval), came out of the job's own signal
        handler (its SIGTERM's sys.exit): then it is raised on the training thread once the request
        is answered, and the job ends as it would have without stepdbg (the eval's answer had taken
        it, and the job stayed paused, its SIGTERM spent)."""
        if not _from_signal_handler(e):
            return False
        self._signalled = e
        return True

    def _raise_signalled(self) -> None:
        e, self._signalled = self._signalled, None
        if e is not None:
            raise e

    def wait_paused(self, timeout: float | None = None, previous: Break | None = None) -> Break | None:
        """Wait until the job is paused at a break other than `previous`; None on timeout."""
        with self._paused_cv:
            self._paused_cv.wait_for(
                lambda: self.paused is not None and self.paused is not previous, timeout=timeout)
            return self.paused if self.paused is not previous else None

    def _resume_with(self, mode: str, arg: Any = None) -> None:
        self._run_mode = (mode, arg)
        self._resume.set()

    def interrupt_job(self) -> dict[str, Any]:
        """Ctrl-C for the job, as if pressed at its terminal: SIGINT to this process. Python
        raises KeyboardInterrupt on the main thread (a pause there ends with it), so the
        script's own Ctrl-C handling runs; a script that ignores SIGINT goes on. Every client
        is told first (a change), so each can say at the end who interrupted the job."""
        self.on_interrupt()
        os.kill(os.getpid(), signal.SIGINT)
        return {"pid": os.getpid()}

    def cont(self) -> None:
        """Continue until the next break."""
        self._resume_with("run")

    def pause(self) -> None:
        """Pause at the next pause point."""
        self._run_mode = ("phase", None)

    def next_phase(self) -> None:
        """Continue to the next pause point: never the one paused at (under torchrun the pause for
        a rank's break comes just before before_optimizer_step's pause point, and n stopped there)."""
        cur = self.paused
        self._resume_with("phase", (cur.step, cur.phase) if cur else None)

    def next_step(self, step: int) -> None:
        """Continue to the same pause point of the next step."""
        cur = self.paused
        self._resume_with("step", (step + 1, cur.phase if cur else "before_forward"))

    def pause_at(self, n: int, step: int) -> None:
        """Pause at step n's before_optimizer_step (outside collectives)."""
        if n < step:
            raise ValueError(f"step {n} has passed (the job is at step {step})")
        self._run_mode = ("step", (n, "before_optimizer_step"))

    def run_to_step(self, n: int, step: int) -> None:
        if n <= step:
            raise ValueError(f"step {n} is not ahead (the job is at step {step})")
        self._resume_with("to_step", n)

    def end(self) -> None:
        """End the job: at once if paused, else at the next pause point."""
        self.end_requested = True
        if self.paused is not None:
            self.cont()
        else:
            self._run_mode = ("phase", None)

    def attached(self) -> None:
        self.frontends += 1
        self.alone_since = None

    def detached(self) -> bool:
        """One front end fewer; True when none is left."""
        self.frontends = max(0, self.frontends - 1)
        if self.frontends == 0:
            self.alone_since = time.monotonic()
            return True
        return False


def _as_selector(who: object, fn: Callable[[], Any]) -> Any:
    """`fn` on the training thread, in its own context (what the job's code sees is the job's),
    with the asking client's frame selection (frames.SELECTOR) for its length alone."""
    token = SELECTOR.set(who)
    try:
        return fn()
    finally:
        SELECTOR.reset(token)


def _from_signal_handler(e: BaseException) -> bool:
    """`e`'s traceback runs through a Python function installed as a signal's handler."""
    codes = set()
    for n in signal.valid_signals():
        try:
            h = signal.getsignal(n)
        except (OSError, ValueError):
            continue
        h = h.__func__ if isinstance(h, types.MethodType) else h
        if isinstance(h, types.FunctionType):
            codes.add(h.__code__)
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False
