"""The Session: one per training process, a small facade over the agent's parts.

- ``StepModel`` (step_model.py): torch's hooks → phases → steps; it calls this Session
  (its ``StepListener``) at every pause point, on the training thread;
- ``Breakpoints`` (breakpoints.py): which conditions hold at a pause point;
- ``Controls`` (controls.py): pause/resume and the work handed to the paused thread;
- ``Changes`` (changes.py): LR, pins and skips; ``Evaluator`` (evaluate.py): code in
  the paused frame.

Everything a front end may ask for is a public method here that is safe to call from any
thread; work that must run on the training thread is queued to it while it is paused.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.breaks.breakpoints import Breakpoints, break_scalars
from stepdbg.agent.breaks.changes import Changes
from stepdbg.agent.breaks.controls import EXIT_ABORT, Abort, Break, Controls, NotPaused
from stepdbg.agent.breaks.ranks import Ranks
from stepdbg.agent.breaks.rewind import Rewinder
from stepdbg.agent.measure.frames import PausedStack, framework_frame, user_frame, where_of
from stepdbg.agent.report import Report, rank_path
from stepdbg.agent.session_controls import ControlOps
from stepdbg.agent.step.activations import ActivationWatch
from stepdbg.agent.step.hooks import Guard
from stepdbg.agent.step.step_model import StepModel, opt_params
from stepdbg.agent.step.wrappers import find_existing_optimizers
from stepdbg.agent.views import inspection
from stepdbg.agent.views.evaluate import Evaluator
from stepdbg.agent.views.views import ViewOps
from stepdbg.wire.conditions import ACTIONS, Condition

__all__ = ["EXIT_ABORT", "Abort", "Break", "NotPaused", "Session"]

class Session(ControlOps, ViewOps):
    """The in-process debugger: one per training process."""

    def __init__(
        self,
        breaks: Iterable[str | Condition] = ("nan", "exception"),
        actions: Iterable[str] = ("report",),
        report: str | None = None,
        argv: list[str] | None = None,
        quiet: bool = False,
    ) -> None:
        self.break_set = Breakpoints(breaks)
        self.actions = list(actions)
        for a in self.actions:
            if a not in ACTIONS:
                raise ValueError(f"unknown action {a!r}; known: {', '.join(ACTIONS)}")
        # Actions nobody chose (the defaults): with a front end attached, a break pauses.
        self.actions_defaulted = False
        rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
        if rank is not None and world not in (None, "1"):  # a rank of a distributed job
            self.report = Report(rank_path(report, int(rank)) if report else None, {"rank": int(rank)})
        else:
            self.report = Report(report)
        self.argv = list(argv if argv is not None else sys.argv)
        self.quiet = quiet
        self.prefix = f"stepdbg[rank {rank}]" if rank is not None and world not in (None, "1") else "stepdbg"
        self.pid = os.getpid()
        self.breaks: list[Break] = []
        self.changes: list[dict[str, Any]] = []
        self.replays: list[dict[str, Any]] = []
        self.guard = Guard(self._hook_failed, passthrough=(Abort, KeyboardInterrupt))
        self.model = StepModel(self, self.guard)
        self.model.armed = "replay" in self.actions
        self.controls = Controls(lambda: self.model.thread)
        self.changer = Changes(self.model, self._log_change)
        self.rewinder = Rewinder(self.model)  # snapshots (--keep-every) and rewinds
        self.paused_stack = PausedStack()  # the user's frames at a pause; u/d select one
        self.evaluator = Evaluator(self.model, self.controls, lambda: self.paused_stack.selected())
        self.ranks = Ranks()
        # Called with (event, data) on the thread where it happens: "break", "paused",
        # "resumed", "step", "change", "replay", "finding", "output". The server forwards them.
        self.listeners: list[Callable[[str, Any], None]] = []
        self.on_stop: list[Callable[[], None]] = []  # run before the server says "exited"
        self.server: Any = None
        self._doctor: Any = None
        self.stop_after: int | None = None  # end the run (exit 0) after this many steps
        self._watchdog: Any = None
        self._started = False
        self.activations = ActivationWatch()

    # ------------------------------------------------------------------ parts, as attributes

    @property
    def step(self) -> int:
        return self.model.step

    @property
    def history(self) -> Any:
        return self.model.history

    @property
    def capture(self) -> dict[str, Any]:
        return self.model.capture

    @property
    def conditions(self) -> list[Condition]:
        return self.break_set.conditions

    @property
    def disabled_hooks(self) -> set[str]:
        """Hooks that failed and turned themselves off."""
        return self.guard.disabled

    @property
    def paused(self) -> Break | None:
        return self.controls.paused

    @property
    def frontends(self) -> int:
        return self.controls.frontends

    @property
    def armed(self) -> bool:
        """Whether what a replay of the backward needs is kept (a front end is attached,
        or the replay action was chosen)."""
        return self.model.armed

    @armed.setter
    def armed(self, value: bool) -> None:
        self.model.armed = value

    @property
    def overfit(self) -> bool:
        return self.model.overfit

    @overfit.setter
    def overfit(self, value: bool) -> None:
        self.model.overfit = value

    @property
    def wait_for_frontend(self) -> bool:
        return self.controls.wait_for_frontend

    @wait_for_frontend.setter
    def wait_for_frontend(self, value: bool) -> None:
        self.controls.wait_for_frontend = value

    @property
    def detach_timeout(self) -> float | None:
        return self.controls.detach_timeout

    @detach_timeout.setter
    def detach_timeout(self, value: float | None) -> None:
        self.controls.detach_timeout = value

    @property
    def doctor(self) -> Any:
        """A diagnostics.Doctor when the rules are on (stepdbg doctor), else None."""
        return self._doctor

    @doctor.setter
    def doctor(self, doctor: Any) -> None:
        self._doctor = doctor
        if doctor is not None:
            doctor.notify = self._finding
            doctor.write = self.report.write

    # ------------------------------------------------------------------ lifecycle

    def start(self, scan_existing: bool = False) -> Session:
        """Install the hooks and write the start event. Idempotent.

        `scan_existing` looks for optimizers built before this call (``watch()`` in a
        script); the launcher starts the session before the script's first line.
        """
        if self._started:
            return self
        from stepdbg.version import __version__

        self._started = True
        self.model.install(self.activations.on_output if self.break_set.has("activations") else None)
        if scan_existing:
            find_existing_optimizers(self.model)
        self.report.write(
            "start", pid=self.pid, argv=self.argv, torch=torch.__version__, stepdbg=__version__,
            breaks=self.break_specs(), actions=self.actions,
        )
        stall = self.break_set.first("stall")
        if stall is not None:
            from stepdbg.agent.breaks.watchdog import Watchdog

            self._watchdog = Watchdog(self.model, stall, self.report_stall, self.say)
            self._watchdog.start()
        os.register_at_fork(after_in_child=self._forked)
        return self

    def stop(self, exit_code: int | None = None, error: str | None = None) -> None:
        """Remove every hook, write the end event, close the report. `error`: the
        exception that ended the script, as its traceback's last lines."""
        if not self._started:
            return
        self._started = False
        if self._watchdog is not None:
            self._watchdog.stop()
        self.model.remove()
        for fn in self.on_stop:
            with contextlib.suppress(Exception):
                fn()
        if self.server is not None:
            self.server.stop(exit_code, error)
        repeats = self.break_set.repeats
        self.report.write("end", exit_code=exit_code, error=error, steps=self.step, breaks=len(self.breaks),
                          repeats_not_reported=repeats)
        if repeats:
            self.say("conditions that stayed true (reported once): "
                      + ", ".join(f"{k} x{v}" for k, v in repeats.items()))
        self.report.close()

    def _forked(self) -> None:
        # A DataLoader worker (fork) inherits us; it must not report or pause.
        self.model.active = False
        self._started = False
        self._watchdog = None

    # ------------------------------------------------------------------ breakpoints

    def add_break(self, spec: str | Condition) -> Condition:
        c = self.break_set.add(spec)
        if c.kind == "activations" and self.model.active:
            self.model.install_activation_hook(self.activations.on_output)
        self._log_change("break_add", spec=c.spec)
        return c

    def break_specs(self) -> list[str]:
        return self.break_set.specs()

    def breakpoints(self) -> list[dict[str, Any]]:
        """Each breakpoint with its kind, where it is checked and whether it is on."""
        return self.break_set.listing()

    def enable_break(self, spec: str, enabled: bool = True) -> None:
        self.break_set.enable(spec, enabled)
        self._log_change("break_enable", spec=spec, enabled=enabled)

    def remove_break(self, spec: str) -> None:
        self.break_set.remove(spec)
        self._log_change("break_remove", spec=spec)

    # ------------------------------------------------------------------ the step model's listener

    def pause_point(self, phase: str) -> None:
        if self.controls.end_requested:
            self.say(f"ending the job (exit code {EXIT_ABORT}) as asked by a client")
            raise Abort()
        self.model.enter(phase)
        if phase == "after_forward" and self.activations.pending:
            found = self.activations.producer()
            spec = self.break_set.first("activations")
            if found is not None and spec is not None and not self.break_set.repeat(spec.spec, self.step):
                name, mtype = inspection.module_name(self.model.roots.values(), found), type(found).__name__
                self._break(spec.spec, f"module {name} ({mtype}) produced a non-finite output from finite inputs",
                            phase="forward", details={"module": name, "module_type": mtype})
        if not self.break_set.checks(phase) and self.controls.running_free():
            return  # the hot path: nothing listens at this pause point
        hits = [h for h in self.break_set.check(phase, self.model) if not self.break_set.repeat(h[0], self.step)]
        if hits:  # one break names every condition that holds here (Break.conditions)
            details = {k: v for _, _, d in hits for k, v in d.items()}
            self._break(hits[0][0], "; ".join(r for _, r, _ in hits), details, phase=phase,
                        conditions=[spec for spec, _, _ in hits])
            return
        stop = self.controls.stop_reason(phase, self.step)
        if stop:
            self._break("pause", stop, phase=phase, actions=["pause"])

    def needs_grad_norm(self) -> bool:
        return self.break_set.reads_grad_norm()

    def on_batch(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if self._doctor is not None:
            self._doctor.on_batch(self.model, module, args)

    def on_nograd_forward(self, module: torch.nn.Module) -> None:
        if self._doctor is not None:
            self._doctor.on_nograd_forward(self.model, module)

    def on_loss(self, loss: torch.Tensor | None) -> None:
        if self._doctor is not None:
            self._doctor.before_backward(self.model, loss)

    def before_update(self, opt: torch.optim.Optimizer) -> None:
        self.rewinder.before_update()
        self.changer.apply_pins(opt)
        self.rewinder.scale_lr(opt)
        if self._doctor is not None:
            self.guard("doctor", self._doctor.before_update, self.model, opt)
        if self.ranks.active():
            req = self.guard("ranks", self.ranks.due, self.step)
            if req is not None and req.get("kind") == "rewind":
                self.rewind_for_rank(req)
            elif req is not None:
                self.pause_for_rank(req)

    def update_starts(self, opt: torch.optim.Optimizer) -> None:
        if self.model.ensure_step().skip:
            self.changer.hide_grads(opt)

    def after_update(self, opt: torch.optim.Optimizer) -> None:
        self.changer.restore_grads()
        self.rewinder.unscale_lr()
        if self._doctor is not None:
            self.guard("doctor", self._doctor.on_update, self.model, opt_params(opt))

    def on_step_end(self, record: dict[str, Any]) -> None:
        self.guard("rewind", self.snapshot_or_rewind)
        if self.listeners:
            self.emit("step", record)
        if self._doctor is not None:
            self.guard("doctor", self._doctor.on_step_end, self.model)
        if self.overfit and self.step == 1 and not self.model.has_batch_to_repeat():
            self.cannot_overfit_here()
        if self.stop_after is not None and self.step >= self.stop_after:
            self.finish_early()

    def on_process_group(self, timeout: Any, ready: bool) -> None:
        if not ready:
            self.ranks.job_started(timeout)
            return
        self.guard("ranks", self.ranks.active)  # says which node this rank is on
        if self.frontends:
            self.guard("ranks", self.ranks.raise_timeout)

    # ------------------------------------------------------------------ breaks

    def _break(self, condition: str, reason: str, details: dict[str, Any] | None = None, phase: str | None = None,
               actions: list[str] | None = None, frame: FrameType | None = None, coordinated: bool = False,
               conditions: list[str] | None = None, stack: PausedStack | None = None) -> Break:
        st = self.model.current
        framework = framework_frame(sys._getframe(1)) if frame is None else None
        stack = stack or PausedStack.from_frame(frame or sys._getframe(1))
        frame = frame or stack.innermost()
        brk = Break(step=st.index if st else self.step, phase=phase or (st.phase if st else "none"),
                    condition=condition, reason=reason, scalars=break_scalars(self.model), where=where_of(frame),
                    details=details or {}, conditions=conditions or [condition])
        if brk.where is not None and framework is not None:  # the trainer's frame, beside the user's
            brk.where["framework"] = {k: v for k, v in (where_of(framework) or {}).items() if k != "code"}
        self.breaks.append(brk)
        self.report.write("break", **asdict(brk))
        self.emit("break", asdict(brk))
        self.say(f"break at step {brk.step} ({brk.phase}) [{condition}]: {reason}"
                  + (f"\n  at {brk.where['file']}:{brk.where['line']}  {brk.where['code']}" if brk.where else ""))
        self.paused_stack = stack  # the frames the actions (replay, the console) look at
        try:
            if actions is None:
                actions = ["pause"] if self.frontends and self.actions_defaulted else self.actions
            if ("pause" in actions and not coordinated and condition != "pause" and phase != "exception"
                    and self.ranks.active()):
                # Pause the whole job together, outside any collective (see ranks.py).
                target = self.guard("ranks", self.ranks.request_pause, brk.step, brk.phase, reason, condition)
                if target is not None:  # else (the store is gone) this rank pauses alone
                    brk.details["pause_at_step"] = target
                    actions = [a for a in actions if a != "pause"]
            for action in actions:
                if action == "replay":
                    self.replay()
                elif action == "skip":
                    self.skip_step()
                elif action == "rewind":
                    self.guard("rewind", self.rewind_at_break, brk)  # a bug of the rewind's turns off the rewind only
                elif action == "abort":
                    self.say(f"aborting (exit code {EXIT_ABORT}) as asked by --on-break abort")
                    raise Abort()
                elif action == "pause":
                    self._pause(brk)
        finally:
            self.paused_stack = PausedStack()
        return brk

    def breakpoint(self, frame: FrameType | None = None) -> None:
        """Pause here, as asked by the user's code."""
        if not self.model.active or self.model.busy or self.paused is not None:
            return
        self.model.ensure_step()
        self._break("breakpoint()", "stepdbg.breakpoint() was called", phase="breakpoint",
                    actions=["pause"], frame=frame or user_frame(sys._getframe(1)))

    def post_mortem(self, exc: BaseException) -> Break | None:
        """Break on an uncaught exception, if asked to (condition `exception`)."""
        cond = self.break_set.first("exception")
        if cond is None or isinstance(exc, (SystemExit, KeyboardInterrupt)) or not self.model.active:
            return None
        tb = exc.__traceback__
        frames = []
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        user = [(f, n) for f, n in frames if user_frame(f) is f]
        frame, lineno = user[-1] if user else (frames[-1] if frames else (None, None))
        details = {
            "exception": type(exc).__name__,
            "message": str(exc),
            "explanation": inspection.explain_error(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "locals": inspection.tensor_locals(frame) if frame is not None else {},
            "module": inspection.failing_module(self.model.roots.values(), [f for f, _ in frames]),
        }
        self.model.reset_depths()
        brk = self._break(cond.spec, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                          details=details, phase="exception",
                          actions=[a for a in self.actions if a not in ("skip", "rewind")], frame=frame,
                          stack=PausedStack.from_traceback(frames))
        if brk.where and lineno:
            brk.where = where_of(frame, lineno)
        return brk

    # ------------------------------------------------------------------ pausing and controls

    def _pause(self, brk: Break) -> None:
        console = self.frontends == 0 and not self.wait_for_frontend
        if console:
            from stepdbg.client.console import can_prompt, run_console

            if not can_prompt():
                self.say("not pausing: no front end is attached and stdin is not a terminal")
                return
        self.controls.begin_pause(brk)
        self.model.halted = True
        held_from = time.perf_counter()
        self.emit("paused", brk)
        try:
            if console:
                run_console(self)
            else:
                if self.frontends == 0:
                    self.say(f"paused; waiting for a client: {self.server.attach_command if self.server else ''}")
                self.controls.hold(on_idle=self._alone_too_long)
        finally:
            self.model.halted = False
            self.model.data.paused(time.perf_counter() - held_from)
            self.controls.end_pause()
            self.model.progress()
            self.emit("resumed", {"step": self.step})
        if self.controls.end_requested:
            self.say(f"ending the job (exit code {EXIT_ABORT}) as asked by a client")
            raise Abort()

    def _alone_too_long(self) -> None:
        self.say(f"no client for {self.detach_timeout:g}s: resuming (--detach-timeout)")
        self.cont()

    def _log_change(self, what: str, **fields: Any) -> dict[str, Any]:
        rec = {"what": what, "step": self.step, **fields}
        self.changes.append(rec)
        self.report.write("change", **rec)
        self.emit("change", rec)
        self.say(f"change: {what} " + ", ".join(f"{k}={v}" for k, v in fields.items()))
        return rec

    # ------------------------------------------------------------------ output

    def emit(self, event: str, data: Any) -> None:
        """Tell every listener (the server, which tells the clients)."""
        for listener in list(self.listeners):
            try:
                listener(event, data)
            except Exception as e:  # a listener must never reach the training loop
                self.say(f"event listener failed: {type(e).__name__}: {e}")


    def _finding(self, f: Any) -> None:
        self.report.write("finding", **asdict(f))
        self.emit("finding", asdict(f))
        self.say(f"finding [{f.rule}] {f.message} — try: {f.advice}")

    def _hook_failed(self, name: str, e: BaseException) -> None:
        self.say(f"internal error in the {name} hook, which is now off: {type(e).__name__}: {e}")
        self.report.write("error", hook=name, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(f"{self.prefix}: {msg}", file=sys.stderr, flush=True)  # under torchrun: which rank

