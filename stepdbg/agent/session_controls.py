"""The Session's controls, as front ends call them: stepping, attaching, changes.

A mixin of ``Session`` (session.py): each method hands the request to the part that owns
it (``Controls``, ``Changes``, ``Ranks``) with what that part needs from the session.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from stepdbg.agent.breaks.breakpoints import break_scalars
from stepdbg.agent.breaks.controls import EXIT_ABORT, Abort, Break, NotPaused
from stepdbg.agent.breaks.rewind import NoSnapshot, Snapshot
from stepdbg.agent.measure.frames import user_frame, where_of
from stepdbg.wire.conditions import format_size

EXIT_CANNOT_OVERFIT = 2  # stepdbg cannot do what it was asked with this script

if TYPE_CHECKING:
    from stepdbg.agent.breaks.changes import Changes
    from stepdbg.agent.breaks.controls import Controls
    from stepdbg.agent.breaks.ranks import Ranks
    from stepdbg.agent.breaks.rewind import Rewinder
    from stepdbg.agent.step.step_model import StepModel


class ControlOps:
    """Pause, resume, stepping, attach/detach and changes, safe from any thread."""

    controls: Controls
    changer: Changes
    model: StepModel
    ranks: Ranks
    rewinder: Rewinder
    actions: list[str]
    armed: bool
    step: int
    guard: Any
    say: Callable[[str], None]

    def on_training_thread(self, fn: Callable[[], Any], timeout: float = 300.0) -> Any:
        """Run `fn` on the paused training thread and return its result."""
        return self.controls.on_training_thread(fn, timeout)

    def wait_paused(self, timeout: float | None = None, previous: Break | None = None) -> Break | None:
        """Wait until the job is paused at a break other than `previous`; None on timeout."""
        return self.controls.wait_paused(timeout, previous)

    def attach(self) -> None:
        """A front end is attached: pauses wait for it, replay is armed, and a distributed
        job's collectives stop timing out (a paused rank would otherwise kill the job)."""
        self.controls.attached()
        self.armed = True
        self.guard("ranks", self.ranks.raise_timeout)

    def detach(self, then: str = "stay") -> None:
        """A front end left. `then`: "stay" (a paused job waits for a re-attach),
        "continue" or "end" (the job ends with exit code 3)."""
        if self.controls.detached():
            self.armed = "replay" in self.actions
            self.guard("ranks", self.ranks.restore_timeout)
        if then == "continue":
            self.cont()
        elif then == "end":
            self.end()

    def end(self) -> None:
        """End the job: at once if paused, else at the next pause point (exit code 3)."""
        self.controls.end()

    def interrupt_job(self) -> dict[str, Any]:
        """Ctrl-C for the job, as if pressed at its terminal: SIGINT to this process. Python
        raises KeyboardInterrupt on the main thread (a pause there ends with it), so the
        script's own Ctrl-C handling runs; a script that ignores SIGINT goes on."""
        self.say("Ctrl-C from a front end: SIGINT to the job (its own Ctrl-C handling runs)")
        os.kill(os.getpid(), signal.SIGINT)
        return {"pid": os.getpid()}

    def cont(self) -> None:
        """Continue until the next break."""
        self.controls.cont()

    def pause(self) -> None:
        """Pause at the next pause point."""
        self.controls.pause()

    def next_phase(self) -> None:
        self.controls.next_phase()

    def next_step(self) -> None:
        """Continue to the same pause point of the next step."""
        self.controls.next_step(self.step)

    def pause_at(self, n: int) -> None:
        """Pause at step n's before_optimizer_step (outside collectives): what a client
        sends to every rank of a job, with n past every rank's current step."""
        self.controls.pause_at(n, self.step)

    def run_to_step(self, n: int) -> None:
        self.controls.run_to_step(n, self.step)

    def set_lr(self, lr: float, group: int | None = None, pin: bool = False) -> dict[str, Any]:
        """Set the learning rate of one param group (or all); `pin` keeps it set."""
        return self.changer.set_lr(lr, group, pin)

    def set_param_group(self, key: str, value: float, group: int | None = None) -> dict[str, Any]:
        """Set another hyperparameter (weight_decay, momentum, ...) of a param group."""
        return self.changer.set_param_group(key, value, group)

    def skip_step(self) -> dict[str, Any]:
        """Do not apply this step's update (the optimizer sees no gradients this once)."""
        return self.changer.skip_step()

    # ------------------------------------------------------------------ rewind (rewind.py)

    def rewind(self, step: int | None = None) -> dict[str, Any]:
        """At a pause: go back to the newest snapshot from before this step (or to the one of
        `step`) where this step ends, with this step's update dropped; then continue."""
        if self.paused is None:
            raise NotPaused("rewind needs a paused job")
        if self.ranks.active():
            raise RuntimeError("in a job of many ranks, rewind with --on-break rewind (every rank must agree)")
        snap = self.rewinder.choose(self.step, step)
        rec = self._plan_rewind(snap, "asked by a client")
        self.cont()
        return rec

    def rewind_at_break(self, brk: Break) -> None:
        """The action `--on-break rewind`: at most --max-rewinds times, then abort."""
        r = self.rewinder
        if r.max_rewinds is not None and r.rewinds >= r.max_rewinds:
            self.say(f"aborting (exit code {EXIT_ABORT}): a break after {r.rewinds} rewinds (--max-rewinds {r.max_rewinds})")
            raise Abort()
        try:
            snap = r.choose(brk.step)
        except NoSnapshot as e:
            self.say(f"cannot rewind: {e}")
            if "pause" not in self.actions:
                self.say(f"aborting (exit code {EXIT_ABORT}): nothing to rewind to")
                raise Abort() from None
            return
        if self.ranks.active():  # every rank, this one included, rewinds where the agreed step ends
            target = self.guard("ranks", lambda: self.ranks.request_pause(
                brk.step, brk.phase, brk.reason, brk.condition, "rewind", to_step=snap.step))
            if target is not None:
                return
        self._plan_rewind(snap, f"break [{brk.condition}] at step {brk.step}")

    def rewind_for_rank(self, req: dict[str, Any]) -> None:
        """Every rank rewinds for one rank's break, to the snapshot that rank chose (once per step)."""
        if req["step"] <= self.rewinder.agreed_step:
            return  # another rank's request for the same rewind
        self.rewinder.agreed_step = req["step"]
        self.break_set.mark_fired(req["condition"], self.step)
        try:
            snap = self.rewinder.choose(self.step, req["to_step"])
        except NoSnapshot as e:
            self.say(f"cannot rewind with rank {req['rank']}: {e}")
            return
        self._plan_rewind(snap, f"rank {req['rank']}'s break [{req['condition']}] at step {req['broke_at']}")

    def _plan_rewind(self, snap: Snapshot, cause: str) -> dict[str, Any]:
        st = self.model.ensure_step()
        if not st.optimizer_stepped:
            st.skip = True  # this step's update is dropped (were it applied, the restore undoes it)
        r = self.rewinder
        r.pending = snap
        r.rewinds += 1
        extra = {"lr_scale": r.lr_scale, "lr_steps": r.lr_steps} if r.lr_scale != 1.0 and r.lr_steps else {}
        return self._log_change("rewind", to_step=snap.step, batches_skipped=self.step - snap.step + 1,
                                rewinds=r.rewinds, cause=cause, **extra)

    def snapshot_or_rewind(self) -> None:
        """Where a step ends: a rewind asked for in it, or a snapshot when one is due."""
        r = self.rewinder
        taken = r.taken
        r.at_step_end(self.step)
        if r.taken == 1 and taken == 0:
            snap = r.snapshots[-1]
            self.say(f"keeping a snapshot every {r.every} steps ({r.keep} kept): {format_size(snap.nbytes)} each "
                     "(parameters, buffers, optimizer state)")
            self.report.write("snapshot", step=snap.step, bytes=snap.nbytes, every=r.every, keep=r.keep)

    def pause_for_rank(self, req: dict[str, Any]) -> None:
        """Every rank, the one that broke included, pauses here for a rank's break."""
        mine = req["rank"] == self.ranks.rank
        self.break_set.mark_fired(req["condition"], self.step)  # the job broke once, not once per rank
        self.model.ensure_step().phase = "before_optimizer_step"
        reason = (f"paused at step {self.step} for this rank's break at step {req['broke_at']}: {req['reason']}"
                  if mine else f"paused for rank {req['rank']}'s break at step {req['broke_at']}: {req['reason']}")
        self._break(req["condition"] if mine else f"rank {req['rank']}", reason, phase="before_optimizer_step",
                    actions=["pause"], details={"for_rank": req["rank"], "broke_at": req["broke_at"]},
                    coordinated=True)

    def finish_early(self) -> None:
        """End a doctor/overfit run after its steps: exit code 0 from the script's point of view."""
        if self.overfit and self._doctor is not None:
            ok, words = self._doctor.overfit_result(self.model)
            if ok:
                self.say(words)
        self.say(f"stopping after {self.step} steps as asked")
        raise SystemExit(0)

    def cannot_overfit_here(self) -> None:
        """`stepdbg overfit` repeats a DataLoader's first batch; a loop that took none in its
        first step (a get_batch() function, tensors made in the loop) has nothing to repeat:
        say so and end (exit code 2) rather than run the script as usual."""
        words = ("stepdbg overfit repeats the first batch a DataLoader yields, and this loop took no batch from "
                 "a DataLoader in its first step (its data comes from elsewhere): there is no batch to repeat. "
                 "Draw the batches from a DataLoader, or take one batch before the loop and train on it.")
        self.report.write("overfit", losses=[], reached_near_zero=None, verdict=words)
        self.say(words)
        raise SystemExit(EXIT_CANNOT_OVERFIT)

    def report_stall(self, spec: str, reason: str, details: dict[str, Any]) -> None:
        """Called by the watchdog thread: the main thread cannot pause itself."""
        m = self.model
        frame = sys._current_frames().get(m.thread) if m.thread else None
        brk = Break(step=self.step, phase=m.current.phase if m.current else "between steps", condition=spec,
                    reason=reason, scalars=break_scalars(m), where=where_of(user_frame(frame)), details=details,
                    conditions=[spec])
        self.breaks.append(brk)
        self.report.write("break", **asdict(brk))
        self.say(f"break at step {brk.step} ({brk.phase}) [{spec}]: {reason}")
        if "abort" in self.actions:
            self.say(f"aborting (exit code {EXIT_ABORT}): the job is stalled")
            self.stop(exit_code=EXIT_ABORT)
            # Stuck DataLoader workers would outlive us and hold the terminal's pipes.
            for w in (details.get("dataloader") or {}).get("workers", []):
                with contextlib.suppress(OSError, TypeError):
                    os.kill(w["pid"], 9)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_ABORT)
