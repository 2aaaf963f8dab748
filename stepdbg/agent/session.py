"""The Session: one per training process. It builds the agent's parts from one
``AgentConfig``, wires them together, and routes the step model's events to them. It
decides nothing itself; each part owns its business:

- ``model``: ``StepModel`` (step/), torch's hooks → phases → steps; it calls this Session
  (its ``StepListener``) at every pause point, on the training thread;
- ``breaker``: ``Breaker`` (breaks/), which conditions hold, the break, its actions;
  ``rewinds``: ``RewindPlan``; ``controls``: pause/resume; ``changer``: LR, pins, skips;
- ``views``: ``Views`` (views/), what a paused step shows, replay included;
- ``bus``: events to the listeners (the server), the report and stderr.

Front ends reach the parts through the ops (serve/handlers.py), never through here.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from stepdbg.agent.breaks.breaker import Breaker
from stepdbg.agent.breaks.breakpoints import Breakpoints
from stepdbg.agent.breaks.changes import Changes
from stepdbg.agent.breaks.controls import EXIT_ABORT, Abort, ActionHooks, Break, Controls, NotPaused
from stepdbg.agent.breaks.end_stuck import end_if_stuck
from stepdbg.agent.breaks.ranks import Ranks
from stepdbg.agent.breaks.rewind import Rewinder
from stepdbg.agent.breaks.rewind_plan import RewindPlan
from stepdbg.agent.bus import Bus
from stepdbg.agent.doctor.run_end import cannot_overfit_here, finish_early
from stepdbg.agent.measure.memory import record_history
from stepdbg.agent.step.hooks import Guard
from stepdbg.agent.step.optimizer_phase import opt_params
from stepdbg.agent.step.saved_activations import SavedActivations
from stepdbg.agent.step.step_model import StepModel
from stepdbg.agent.step.step_state import begun
from stepdbg.agent.step.wrappers import find_existing_optimizers
from stepdbg.agent.views.views import Views
from stepdbg.wire.agent_config import AgentConfig

__all__ = ["EXIT_ABORT", "Abort", "Break", "NotPaused", "Session"]

Console = Callable[["Session"], None]


class Session:
    """The in-process debugger: one per training process."""

    def __init__(self, config: AgentConfig | None = None, console: Console | None = None,
                 can_prompt: Callable[[], bool] = lambda: False) -> None:
        self.config = config = config or AgentConfig()
        self.argv = list(config.argv or sys.argv)
        self.bus = Bus(config.report, config.quiet, lambda: self.model.step,
                       lambda: begun(self.model.current) is None)  # (paused between steps too: breakpoint())
        self.guard = Guard(self.bus.hook_failed, passthrough=(Abort, KeyboardInterrupt))
        self.model = StepModel(self, self.guard)
        self.controls = Controls(lambda: self.model.thread)
        self.controls.wait_for_frontend = config.serve
        self.controls.detach_timeout = config.detach_timeout
        self.changer = Changes(self.model, self.bus.change)
        self.rewinder = Rewinder(self.model)  # snapshots (--keep-every) and rewinds
        self.rewinder.configure(**config.rewind)
        self.ranks = Ranks()
        actions = list(config.actions)
        self.breaker = Breaker(self.model, Breakpoints(config.breaks), self.controls, self.ranks, self.bus,
                               self.guard, actions)
        self.breaker.actions_defaulted = not config.actions_given
        # The step model's pause points go to the breaker (StepListener.pause_point), straight:
        # six a step, on the training thread.
        self.pause_point: Callable[[str], None] = self.breaker.at_pause_point
        self.rewinds = RewindPlan(self.model, self.rewinder, self.controls, self.ranks, self.breaker.break_set,
                                  self.bus, self.guard, actions)
        self.views = Views(self.model, self.controls, self.changer, self.rewinder, self.ranks, self.breaker,
                           self.bus, self.guard, self.argv)
        self.breaker.hooks = ActionHooks(
            replay=lambda alone: self.views.replay(alone=alone, action=True), sharded=self.views.sharded,
            save=self.views.save, skip=self._skip_at_break, rewind=self.rewinds.at_break,
            console=(lambda: console(self)) if console else None, can_prompt=can_prompt,
            attach_command=lambda: self.server.attach_command if self.server else "", stop=self.stop)
        self.model.armed = bool({"replay", "save"} & set(actions)) or config.doctor
        self.views.bundle_dir = config.bundle_dir
        self.model.overfit = config.overfit
        if config.skip_on_device:  # (on the CPU too: the values are decided where they are made, as on a GPU)
            self.model.device_skip.on, self.model.defer_reads = True, True
        if config.record_memory:
            self.model.saved = SavedActivations()
            self.breaker.record_memory = record_history(True)
        self.doctor: Any = None  # a diagnostics.Doctor when the rules are on (stepdbg doctor)
        if config.doctor:
            from stepdbg.agent.doctor.diagnostics import Doctor

            self.doctor = Doctor()
            self.doctor.notify, self.doctor.write = self.bus.finding, self.bus.write
            self.bus.listeners.append(self.doctor.on_event)  # a NaN break is a finding too
        self.on_stop: list[Callable[[], None]] = []  # run before the server says "exited"
        if config.fingerprint is not None:  # stepdbg diff: a recorder between the step model and us
            from stepdbg.agent.diff.recorder import Recorder

            Recorder.attach(self, **config.fingerprint)
        self.server: Any = None
        self._watchdog: Any = None
        self._started = False

    # ------------------------------------------------------------------ what tests and the server read

    @property
    def step(self) -> int:
        return self.model.step

    @property
    def breaks(self) -> list[Break]:
        return self.breaker.breaks

    @property
    def paused(self) -> Break | None:
        return self.controls.paused

    def say(self, msg: str) -> None:
        self.bus.say(msg)

    def emit(self, event: str, data: Any) -> None:
        self.bus.emit(event, data)

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
        break_set = self.breaker.break_set
        self.model.install()
        if scan_existing:
            find_existing_optimizers(self.model)
        self.bus.write("start", pid=os.getpid(), argv=self.argv, torch=torch.__version__, stepdbg=__version__,
                       breaks=break_set.specs(), actions=self.breaker.actions)
        stall = break_set.first("stall")
        if stall is not None:
            from stepdbg.agent.breaks.job_stall import StallExchange
            from stepdbg.agent.breaks.watchdog import Watchdog

            self.breaker.job = StallExchange(self.ranks, self.model)
            self._watchdog = Watchdog(self.model, stall, self.breaker.stalled, self.bus.say, self.breaker.job,
                                      self.breaker.end_for_rank)
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
        if self.model.device_skip.inflight:  # the last steps' values (--skip-on-device): a NaN there is told
            self.guard("nan", self.breaker.skipped_on_device, None)
        self.model.remove()
        for fn in self.on_stop:
            with contextlib.suppress(Exception):
                fn()
        if self.server is not None:
            self.server.stop(exit_code, error)
        if self.doctor is not None:
            self.guard("doctor", self.doctor.flush_nan_break)
            self.doctor.live.stop()  # (its hook in the garbage collector)
        repeats, skipped = self.breaker.break_set.repeats, self.breaker.repeat_skips.skipped
        self.bus.write("end", exit_code=exit_code, error=error, steps=self.step, breaks=len(self.breaks),
                       repeats_not_reported=repeats, repeats_skipped=skipped)
        if repeats:
            self.bus.say("conditions that stayed true (reported once): "
                         + ", ".join(f"{k} on {v} more step{'s' if v != 1 else ''}"
                                     + (f" ({skipped[k]} of their updates skipped)" if skipped.get(k) else "")
                                     for k, v in repeats.items()))
        self.bus.report.close()

    def _skip_at_break(self) -> None:
        """--on-break skip where the update cannot be skipped (a manual `p -= lr * p.grad`, no
        optimizer object): said in words; it was an internal error with a traceback."""
        try:
            self.changer.skip_step()
        except RuntimeError as e:
            self.bus.say(f"not skipped: {e}")

    def _forked(self) -> None:
        # A DataLoader worker (fork) inherits us; it must not report or pause.
        self.model.active = False
        self._started = False
        self._watchdog = None

    def attach(self) -> None:
        """A front end is attached: pauses wait for it, replay is armed, and a distributed
        job's collectives stop timing out (a paused rank would otherwise kill the job)."""
        self.controls.attached()
        self.model.armed = True
        self._timeout_changed(self.guard("ranks", self.ranks.raise_timeout), "a front end is attached")

    def detach(self, then: str = "stay") -> None:
        """A front end left. `then`: "stay" (a paused job waits for a re-attach),
        "continue" or "end" (the job ends with exit code 3)."""
        if self.controls.detached():
            self.model.armed = bool({"replay", "save"} & set(self.breaker.actions)) or self.doctor is not None
            self._timeout_changed(self.guard("ranks", self.ranks.restore_timeout), "no front end is left")
        if then == "continue":
            self.controls.cont()
        elif then == "end":
            self.end_job()

    def end_job(self) -> None:
        """End the job (exit code 3): at once if paused, else at its next pause point, or, stuck
        between them, from outside (end_stuck.py)."""
        running = self.controls.paused is None
        self.controls.end()
        if running and self.breaker.hooks is not None:
            end_if_stuck(self.breaker)
        elif not running:  # code typed at the pause stops (the end waited for it, to its 60 s limit)
            self.views.evaluator.interrupt(why="the job is ending")

    def _timeout_changed(self, seconds: float | None, why: str) -> None:
        """This rank's collective timeout changed: a line in the report (not said, not a
        change the front ends list: it is stepdbg's own doing, at every attach)."""
        if seconds is not None:
            self.bus.write("collective_timeout", seconds=seconds, why=why)

    # ------------------------------------------------------------------ the step model's listener

    def needs_grad_norm(self) -> bool:
        """A condition reads it, or a front end plots it: removing `grad_norm>X` at a pause
        had stopped the plot at that step (a newcomer's walk of the lr_explode recipe)."""
        return self.breaker.break_set.reads_grad_norm() or self.controls.frontends > 0

    def limits_on_device(self) -> list[float] | None:
        return self.breaker.break_set.limits_on_device

    def reads_loss_at_backward(self) -> bool:
        """Asked on an accelerator, where the loss may wait for the step's one read before the
        update: not when a condition or the doctor reads it, nor when someone will look at a
        break (a front end, a pause, a replay; not under --skip-on-device). Then a NaN loss
        breaks before its backward, which frees the loss graph the replay searches, and
        with many ranks the job pauses before that step's update, not after it."""
        b = self.breaker
        return self.doctor is not None or b.break_set.reads_loss_at_backward() or (
            (bool(self.controls.frontends) or "pause" in b.actions or "replay" in b.actions)
            and not self.model.device_skip.on)

    def on_batch(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if self.changer.pins:  # as the step begins too: what a view reads in it is the LR the update uses
            for opt in self.model.optimizers:  # (a break before the update said the scheduler's)
                self.changer.apply_pins(opt)
        if self.doctor is not None:
            self.guard("doctor", self.doctor.on_batch, self.model, module, args)

    def on_nograd_forward(self, module: torch.nn.Module) -> None:
        if self.doctor is not None:
            self.doctor.on_nograd_forward(self.model, module)

    def on_loss(self, loss: torch.Tensor | None) -> None:
        if self.doctor is not None:
            self.guard("doctor", self.doctor.before_backward, self.model, loss)

    # The update's listeners run every step: what is idle is skipped here, where asking
    # costs an attribute read and not a call.
    def before_update(self, opt: torch.optim.Optimizer) -> None:
        self.rewinder.before_update(opt)
        if self.changer.pins:
            self.changer.apply_pins(opt)
        if self.doctor is not None:
            self.guard("doctor", self.doctor.before_update, self.model, opt)
        if self.ranks.active():
            req = self.guard("ranks", self.ranks.due, self.step)
            if req is not None and req.get("kind") == "rewind":
                self.rewinds.for_rank(req)
            elif req is not None:  # a pause or a replay, every rank together
                self.breaker.pause_for_rank(req)

    def update_starts(self, opt: torch.optim.Optimizer) -> None:
        st = self.model.current
        if st is not None and st.skip:
            self.changer.hide_grads(opt)

    def after_update(self, opt: torch.optim.Optimizer) -> None:
        if self.changer.hidden:
            self.changer.restore_grads()
        if self.rewinder.scaled_lrs:
            self.rewinder.unscale_lr()
        if self.doctor is not None:
            self.guard("doctor", self.doctor.on_update, self.model, opt_params(opt))

    def on_step_end(self, record: dict[str, Any]) -> None:
        if not self.rewinder.idle():
            self.guard("rewind", self.rewinds.at_step_end)
        if self.bus.listeners:
            self.bus.emit("step", record)
        if self.doctor is not None:
            self.guard("doctor", self.doctor.on_step_end, self.model)
        if self.model.overfit and self.step == 1 and not self.model.has_batch_to_repeat():
            cannot_overfit_here(self.bus)
        if self.config.stop_after is not None and self.step >= self.config.stop_after:
            finish_early(self.model, self.doctor, self.bus)

    def on_process_group(self, timeout: Any, ready: bool) -> None:
        if not ready:
            self.ranks.job_started(timeout)
            return
        self.guard("ranks", self.ranks.active)  # says which node this rank is on
        if self.controls.frontends:
            self._timeout_changed(self.guard("ranks", self.ranks.raise_timeout), "a front end is attached")
