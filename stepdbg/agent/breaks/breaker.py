"""The Breaker: breaks and their actions, in one place.

At a pause point the step model calls ``at_pause_point``; the conditions that hold there
(breakpoints.py) make one ``Break`` (controls.py), which is written, told and said, then
its actions run: report, pause (hold the training thread for a front end, or the console
at the terminal), replay, skip, rewind (rewind_plan.py), abort. In a job of many ranks a
pause is agreed first (ranks.py) so the whole job stops together, outside any collective.
Breaks from the user's code (``breakpoint()``), from an uncaught exception (post-mortem)
and from the stall watchdog come here too.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from types import FrameType
from typing import Any

from stepdbg.agent.breaks import as_one_job
from stepdbg.agent.breaks.breakpoints import Breakpoints, break_scalars, replayed
from stepdbg.agent.breaks.controls import EXIT_ABORT, Abort, ActionHooks, Break, Controls
from stepdbg.agent.breaks.job_stall import StallExchange
from stepdbg.agent.breaks.ranks import Ranks
from stepdbg.agent.breaks.repeats import RepeatSkips
from stepdbg.agent.bus import Bus
from stepdbg.agent.measure import census, failures, memory, oom, tensors
from stepdbg.agent.measure.frames import (
    PausedStack,
    exception_text,
    framework_frame,
    user_frame,
    where_of,
)
from stepdbg.agent.replay import activations
from stepdbg.agent.step import host_reads
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire import stall_text
from stepdbg.wire.conditions import Condition

JOB_END_GRACE = 1.0  # seconds a rank told to end a stalled job waits for the rank that told it to end first


class Breaker:
    """Which conditions hold, the break they make, and what is done about it."""

    def __init__(self, model: StepModel, break_set: Breakpoints, controls: Controls, ranks: Ranks, bus: Bus,
                 guard: Any, actions: list[str]) -> None:
        self.model, self.break_set, self.controls, self.ranks = model, break_set, controls, ranks
        self.bus, self.guard, self.actions = bus, guard, actions
        break_set.tell = bus.finding  # an expr: breakpoint whose expression raised, said once
        controls.on_interrupt = lambda: bus.change("interrupt", by="a front end", signal="SIGINT")  # (said as the Log says it)
        self.actions_defaulted = False  # nobody chose the actions: with a front end attached, a break pauses
        self.breaks: list[Break] = []
        self.paused_stack = PausedStack()  # the user's frames at a pause; u/d select one
        self.hooks: ActionHooks | None = None
        self.record_memory = False  # CUDA allocation history is on: a break writes memory-STEP.pickle
        self.snapshots: list[str] = []  # the snapshot files written (memory.SNAPSHOT_CAP at most)
        self.job: StallExchange | None = None  # how ranks tell each other of a stall (set by the Session)
        self._stall: tuple[float, dict[str, Any]] | None = None  # (progress time, job report) of the last stall
        self.ending = False  # the watchdog ends this stalled rank: an error of its training thread is not news
        self.repeat_skips = RepeatSkips(model, bus)  # a repeat's update is skipped too (--on-break skip)

    # ------------------------------------------------------------------ the breakpoints

    def add(self, spec: str | Condition) -> Condition:
        """A breakpoint added; one set already changes nothing, and no change is logged."""
        had = set(self.break_set.specs())
        c = self.break_set.add(spec)
        if c.spec not in had:
            self.bus.change("break_add", spec=c.spec)
        return c

    def enable(self, spec: str, enabled: bool = True) -> None:
        """On or off; one that is so already changes nothing, and no change is logged."""
        was = spec not in self.break_set.disabled
        self.break_set.enable(spec, enabled)
        if was != enabled:
            self.bus.change("break_enable", spec=spec, enabled=enabled)

    def remove(self, spec: str) -> None:
        self.break_set.remove(spec)
        self.bus.change("break_remove", spec=spec)

    # ------------------------------------------------------------------ where breaks come from

    def at_pause_point(self, phase: str) -> None:
        """The step model's pause point: an end asked for, the conditions checked here, then
        a stop asked for."""
        controls, at = self.controls, self.break_set.at
        if phase not in self.break_set.watched and controls.free:
            return  # the hot path (six times a step): nothing listens at this pause point
        if controls.end_requested:
            self.end_now()
        step = self.model.step
        if phase == "before_optimizer_step" and self.model.device_skip.inflight and \
                self.guard("nan", self.skipped_on_device, step):
            return
        st = self.model.current
        if "forward" in at and (phase == "after_forward" or (  # the activation watch (activations.py): or the sums, once read
                phase in ("before_backward", "before_optimizer_step") and st and st.output_finite is False
                and not st.activations_told)):
            self.guard("activations", self._activations, phase, step)
        hits = self.break_set.check(phase, self.model) if phase in at else None
        if hits:
            fresh = [h for h in hits if not self.break_set.repeat(h[0], step)]
            if fresh:  # one break names every condition that holds here (Break.conditions)
                details = {k: v for _, _, d in fresh for k, v in d.items()}
                self.take(fresh[0][0], "; ".join(r for _, r, _ in fresh), details, phase=phase,
                          conditions=[spec for spec, _, _ in fresh])
                return
            self.repeat_skips.skip([spec for spec, _, _ in hits], self._actions(None))  # (no break, but the skip)
        if controls.free:
            return
        stop = controls.stop_reason(phase, step)
        if stop:
            self.take("pause", stop, phase=phase, actions=["pause"])

    def skipped_on_device(self, step: int | None) -> bool:
        """--skip-on-device: earlier steps' values came back (device_skip.py). A bad step's
        update was skipped on the device; its break is taken now, before the update of
        `step`, with its inputs captured for the replay. `step` None: the job ends, every
        step in flight is waited for and a break is told, not paused at."""
        ds = self.model.device_skip
        arrived, actions = (ds.arrived(step), None) if step is not None else (ds.drain(), ["report"])
        first = None
        for d in arrived:  # (each one's record is filled in, whichever breaks)
            found = d.verdict(self.model.history)
            spec = (self.break_set.first(found[0]) or self.break_set.first("activations")) if found else None
            if first is None and found is not None and spec is not None and \
                    not self.break_set.repeat(spec.spec, d.st.index):
                first = (d, spec.spec, found[1])
        if first is None:
            return False
        d, spec, reason = first
        forward = d.focus(self.model)  # the skipped step's inputs: the parameters it ran with are in place
        details: dict[str, Any] = {"skipped_on_device": d.st.index, **({"forward": forward} if forward else {})}
        if spec == "activations" or (d.st.output_finite is False and self.break_set.first("activations")):
            words, found = self._producer()  # the activation watch names the module, as it does in a step
            reason, details = f"{words}; {reason}", {**details, **found}
        where = f"step {d.st.index}" + (f", micro-batch {forward}" if forward else "")
        self.take(spec, f"{where}: {reason} (told one step late: --skip-on-device)",
                  details, phase="before_optimizer_step", actions=actions)
        return True

    def _activations(self, phase: str, step: int) -> None:
        """The activation watch: the model's output is not finite (activations.py decides,
        after the forward or, on an accelerator, with the step's one read before the
        update); which module made it."""
        if not activations.output_nonfinite(self.model, phase):
            return
        if phase != "after_forward" and self.model.current is not None:
            self.model.current.activations_told = True  # (the sums read at a backward are told there, once)
        spec = self.break_set.first("activations")
        if spec is None or self.break_set.repeat(spec.spec, step):
            return self.repeat_skips.skip([spec.spec], self._actions(None)) if spec is not None else None
        forward = activations.bad_micro_batch(self.model)
        reason, details = self._producer()
        if forward is not None:
            reason, details["forward"] = f"{reason} (micro-batch {forward})", forward
        self.take(spec.spec, reason, phase="forward", details=details)

    def _producer(self) -> tuple[str, dict[str, Any]]:
        """The module that made the captured forward's output non-finite, searched by
        running that forward again (activations.find_producer), in words."""
        found = activations.find_producer(self.model)
        if found.module is not None:
            name = failures.module_name(self.model.roots.values(), found.module)
            mtype = type(found.module).__name__
            return (f"module {name} ({mtype}) produced a non-finite output from finite inputs",
                    {"module": name, "module_type": mtype})
        if found.inputs_bad:
            return "the model's inputs are not finite: born in the data", {"module": None}
        if found.not_run is not None:
            return (f"the model's output is not finite; the module that made it was not searched: {found.not_run}",
                    {"module": None})
        return "the model's output is not finite; no module was found to make it from finite inputs", {"module": None}

    def breakpoint(self, frame: FrameType | None = None) -> None:
        """Pause here, as the user's code asks; between steps (`if step == 5:` after opt.step()) at the ended step."""
        if not (m := self.model).active or m.busy or self.controls.paused is not None:
            return
        step, phase, when = (None, "breakpoint", "") if m.current is not None else (
            (m.step - 1, "breakpoint, between steps", f" after step {m.step - 1} ended, before step {m.step} began")
            if m.step > 0 else (0, "breakpoint, before step 0", " before step 0 began"))
        self.take("breakpoint()", "stepdbg.breakpoint() was called" + when, phase=phase, step=step,
                  actions=["pause"], frame=frame or user_frame(sys._getframe(1)))

    def post_mortem(self, exc: BaseException) -> Break | None:
        """Break on an uncaught exception, if asked to (condition `exception`)."""
        cond = self.break_set.first("exception")
        if cond is None or isinstance(exc, (SystemExit, KeyboardInterrupt)) or not self.model.active:
            return None
        tb, frames = exc.__traceback__, []
        while tb is not None:
            frames.append((tb.tb_frame, tb.tb_lineno))
            tb = tb.tb_next
        user = [(f, n) for f, n in frames if user_frame(f) is f]
        frame, lineno = user[-1] if user else (frames[-1] if frames else (None, None))
        details = {
            "exception": type(exc).__name__,
            "message": exception_text(exc),
            "explanation": failures.explain_error(exc),
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
            "locals": failures.tensor_locals(frame) if frame is not None else {},
            "module": failures.failing_module(self.model.roots.values(), [f for f, _ in frames]),
        }
        if memory.is_oom(exc):
            details["oom"] = self.guard("memory", self._oom, exc, PausedStack.from_traceback(frames).frames)
            cause = (details["oom"] or {}).get("cause")
            if cause:
                self.bus.say(f"out of memory, {cause['rule']}: {cause['text']}")
        self.model.reset_depths()
        text = exception_text(exc)
        brk = self.take(cond.spec, f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}",
                        details=details, phase="exception",
                        actions=[a for a in self.actions if a not in ("skip", "rewind")], frame=frame,
                        stack=PausedStack.from_traceback(frames))
        if brk.where and lineno:
            brk.where = where_of(frame, lineno)
        return brk

    def _oom(self, exc: BaseException, frames: list[tuple[FrameType, int]]) -> dict[str, Any]:
        """What an out-of-memory break says: the census at the error, and its cause (oom.py)."""
        m, st = self.model, self.model.current
        user = [f for f, _ in frames]
        batch = None
        if st is not None and st.batch_shape and m.capture.get("step") == st.index:
            args = m.capture.get("args")
            first = tensors.first_tensor(args if args else m.capture.get("kwargs"))
            batch = {"shape": st.batch_shape, "origin": oom.batch_origin(user, first)}
        return oom.explain(exc, census.of_step(m, user), list(m.history), batch, memory.memory()["cuda"])

    def pause_for_rank(self, req: dict[str, Any]) -> None:
        """Every rank pauses (or replays) here for a rank's break (as_one_job.py)."""
        as_one_job.for_rank(self, req)

    def stalled(self, spec: str, reason: str, details: dict[str, Any]) -> Break:
        """The watchdog's break (its own thread: the stuck main thread cannot pause itself).
        In a job of many ranks `details` holds every rank's state and a diagnosis
        (job_stall.py). With the abort action the job ends here (exit code 3), every rank."""
        m = self.model
        frame = sys._current_frames().get(m.thread) if m.thread else None
        brk = Break(step=m.step, phase=m.current.phase if m.current else "between steps", condition=spec,
                    reason=reason, scalars=break_scalars(m), where=where_of(user_frame(frame)), details=details,
                    conditions=[spec])
        self.breaks.append(brk)
        if details.get("ranks"):
            self._stall = (m.last_progress, {"step": brk.step, "reason": reason, "diagnosis": details["diagnosis"],
                                             "ranks": details["ranks"]})
        self.bus.write("break", **asdict(brk))
        self.bus.emit("break", asdict(brk))  # (the front ends: no pause follows, the thread is stuck)
        self.bus.say("\n  ".join([f"break at step {brk.step} ({brk.phase}) [{spec}]: {reason}",
                                  *stall_text.report_lines(details)]))
        if "abort" in self.actions and self.hooks is not None:
            self.ending = True
            if self.job is not None and details.get("ask_id") is not None:
                self.guard("ranks", self.job.end_job, details["ask_id"], details["ranks"], 2 * JOB_END_GRACE)
            self.end_stalled(details, "the job is stalled")
        return brk

    def stall_report(self) -> dict[str, Any] | None:
        """The job-wide report of the stall this rank is still in (none once it moved on)."""
        if self._stall is None or self._stall[0] != self.model.last_progress:
            return None
        return self._stall[1]

    def end_for_rank(self, rank: int) -> None:
        """Rank `rank` reported the job's stall and ends the job (--on-break abort): it exits
        first; the collective this rank's training thread waits in then fails, unsaid
        (bootstrap sees `ending`), and this rank ends too."""
        self.ending = True
        time.sleep(JOB_END_GRACE)
        self.end_stalled({}, f"rank {rank} reported the job's stall")

    def end_stalled(self, details: dict[str, Any], why: str) -> None:
        """End a stalled job from the watchdog's thread (exit code 3), its stuck DataLoader
        workers killed: they would outlive us and hold the terminal's pipes."""
        assert self.hooks is not None
        try:  # whatever fails here, the rank ends: its training thread may wait for that (bootstrap)
            self.bus.say(f"aborting (exit code {EXIT_ABORT}): {why}")
            self.hooks.stop(exit_code=EXIT_ABORT)
            for w in (details.get("dataloader") or {}).get("workers", []):
                with contextlib.suppress(OSError, TypeError):
                    os.kill(w["pid"], 9)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(EXIT_ABORT)

    # ------------------------------------------------------------------ a break and its actions

    def take(self, condition: str, reason: str, details: dict[str, Any] | None = None, phase: str | None = None,
             actions: list[str] | None = None, frame: FrameType | None = None, coordinated: bool = False,
             conditions: list[str] | None = None, stack: PausedStack | None = None, step: int | None = None) -> Break:
        """Make the break (at `step`, else the current one's), tell it, and run its actions on this thread."""
        st = self.model.current
        if st is not None and (st.pending_losses or st.pending_outputs) and phase != "exception":
            # Kept on the device for the read before the update: at a break a read costs
            # nothing, and the break shows the loss (not after an error: CUDA's may stick).
            self.guard("break_read", host_reads.read_pending, st)
        framework = framework_frame(sys._getframe(1)) if frame is None else None
        stack, where = self.model.caller.place(sys._getframe(1), frame, stack)  # (under a trainer: its frames)
        ended = self.model.history[-1] if st is None and step is not None and self.model.history else {}  # (its record)
        scalars = break_scalars(self.model) | {k: ended[k] for k in ("loss", "grad_norm", "data_wait") if k in ended}
        brk = Break(step=step if step is not None else st.index if st else self.model.step, phase=phase or (st.phase if st else "none"),
                    condition=condition, reason=replayed(reason) if "replay" in self._actions(actions) else reason, scalars=scalars, where=where,
                    details=details or {}, conditions=conditions or [condition])
        if self.record_memory:
            path, why_not = memory.dump_snapshot(f"memory-{brk.step}", self.snapshots)
            brk.details["memory_snapshot"] = path
            if why_not:
                brk.details["memory_snapshot_error"] = why_not
                self.bus.say(f"memory snapshot {why_not}")
        if brk.where is not None and framework is not None:  # the trainer's frame, beside the user's
            brk.where["framework"] = {k: v for k, v in (where_of(framework) or {}).items() if k != "code"}
        self.breaks.append(brk)
        self.bus.write("break", **asdict(brk))
        self.bus.emit("break", asdict(brk))
        self.bus.say(f"break at step {brk.step} ({brk.phase}) [{condition}]: {brk.reason}"
                     + (f"\n  at {brk.where['file']}:{brk.where['line']}  {brk.where['code']}" if brk.where else ""))
        self.paused_stack = stack  # the frames the actions (replay, the console) look at
        try:
            self._act(brk, actions, coordinated)
        finally:
            self.paused_stack = PausedStack()
        return brk

    def _act(self, brk: Break, actions: list[str] | None, coordinated: bool) -> None:
        assert self.hooks is not None, "the Session sets the action hooks before the first step"
        actions = self._actions(actions)
        self.repeat_skips.broke(brk.conditions)
        if actions == ["report"] and self.actions_defaulted and len(self.breaks) == 1:  # (a newcomer waits for a prompt)
            goes_on = ("the exception goes on to the script" if "exception" in brk.conditions  # (it is ending)
                       else "the job goes on")
            self.bus.say(f"{goes_on}: report is the default action; --on-break pause stops at a break "
                         "(a console at this terminal), and stepdbg serve waits for stepdbg attach")
        actions = as_one_job.coordinate(self, brk, actions, coordinated)  # a pause, a sharded replay: every rank
        hooks = self.hooks
        run: dict[str, Callable[[], Any]] = {  # ("report": the break is told already)
            "replay": lambda: hooks.replay(True), as_one_job.REPLAY_TOGETHER: lambda: hooks.replay(False),
            "skip": hooks.skip, "abort": lambda: self._abort(brk), "pause": lambda: self.pause(brk),
            "save": lambda: self.guard("bundle", hooks.save),  # a failure to save never ends the job
            "rewind": lambda: self.guard("rewind", hooks.rewind, brk),  # a bug of the rewind's turns off the rewind only
        }
        for action in actions:
            if action in run:
                run[action]()

    def _actions(self, actions: list[str] | None) -> list[str]:  # given, else --on-break's (a front end's pause if none chosen)
        return actions if actions is not None else ["pause"] if self.controls.frontends and self.actions_defaulted else self.actions

    def _abort(self, brk: Break) -> None:
        self.bus.say(f"aborting (exit code {EXIT_ABORT}) as asked by --on-break abort")
        self.guard("ranks", self.ranks.announce_end, f"its break at step {brk.step} [{brk.condition}] aborted it",
                   EXIT_ABORT)
        raise Abort()

    def pause(self, brk: Break) -> None:
        """Hold the training thread: for the front ends, or the console at the job's terminal."""
        assert self.hooks is not None
        console = self.controls.frontends == 0 and not self.controls.wait_for_frontend
        if console and (self.hooks.console is None or not self.hooks.can_prompt()):
            self.bus.say("not pausing: no front end is attached and stdin is not a terminal")
            return
        self.controls.begin_pause(brk)
        self.model.halted = True
        held_from = time.perf_counter()
        self.bus.emit("paused", brk)
        try:
            if console and self.hooks.console is not None:
                self.hooks.console()
            else:
                if self.controls.frontends == 0:
                    self.bus.say(f"paused; waiting for a client: {self.hooks.attach_command()}")
                self.controls.hold(on_idle=self._alone_too_long)
        finally:
            self.model.halted = False
            held = time.perf_counter() - held_from
            self.model.data.paused(held)
            if self.model.current is not None:  # (time held is not the step's: step_time, `step_time>X`)
                self.model.current.started += held
            self.controls.end_pause()
            self.model.progress()
            self.bus.emit("resumed", {"step": self.model.step})
        if self.controls.end_requested:
            self.end_now()

    def _alone_too_long(self) -> None:
        self.bus.say(f"no client for {self.controls.detach_timeout:g}s: resuming (--detach-timeout)")
        self.controls.cont()

    def end_now(self) -> None:
        self.bus.say(f"ending the job (exit code {EXIT_ABORT}) as asked by {self.controls.end_asked_by}")
        self.guard("ranks", self.ranks.announce_end, "a client ended it", EXIT_ABORT)
        raise Abort()
