"""When to rewind, and to which snapshot: the decisions; rewind.py keeps the snapshots and
does the restoring.

A rewind is planned at a break (``--on-break rewind``), asked for by a front end at a
pause, or agreed with the other ranks of a job (every rank rewinds to the snapshot the
breaking rank chose, where the same step ends). Planning marks this step's update as
dropped; the restore happens where the step ends (``at_step_end``).
"""

from __future__ import annotations

from typing import Any

from stepdbg.agent.breaks.breakpoints import Breakpoints
from stepdbg.agent.breaks.controls import EXIT_ABORT, Abort, Break, Controls, NotPaused
from stepdbg.agent.breaks.ranks import Ranks
from stepdbg.agent.breaks.rewind import NoSnapshot, Rewinder, Snapshot
from stepdbg.agent.bus import Bus
from stepdbg.agent.step.step_model import StepModel
from stepdbg.wire.conditions import format_size


class RewindPlan:
    """Rewinds: from a front end, from the rewind action, from another rank's break."""

    def __init__(self, model: StepModel, rewinder: Rewinder, controls: Controls, ranks: Ranks,
                 break_set: Breakpoints, bus: Bus, guard: Any, actions: list[str]) -> None:
        self.model, self.rewinder, self.controls, self.ranks = model, rewinder, controls, ranks
        self.break_set, self.bus, self.guard, self.actions = break_set, bus, guard, actions

    def asked(self, step: int | None = None) -> dict[str, Any]:
        """At a pause: go back to the newest snapshot from before this step (or to the one of
        `step`) where this step ends, with this step's update dropped; then continue."""
        if self.controls.paused is None:
            raise NotPaused("rewind needs a paused job")
        if self.ranks.active():
            raise RuntimeError("in a job of many ranks, rewind with --on-break rewind (every rank must agree)")
        snap = self.rewinder.choose(self.model.step, step)
        rec = self._plan(snap, "asked by a client")
        self.controls.cont()
        return rec

    def at_break(self, brk: Break) -> None:
        """The action `--on-break rewind`: at most --max-rewinds times, then abort."""
        r = self.rewinder
        if r.max_rewinds is not None and r.rewinds >= r.max_rewinds:
            self.bus.say(f"aborting (exit code {EXIT_ABORT}): a break after {r.rewinds} rewinds "
                         f"(--max-rewinds {r.max_rewinds})")
            raise Abort()
        try:
            snap = r.choose(brk.step)
        except NoSnapshot as e:
            self.bus.say(f"cannot rewind: {e}")
            if "pause" not in self.actions:
                self.bus.say(f"aborting (exit code {EXIT_ABORT}): nothing to rewind to")
                raise Abort() from None
            return
        if self.ranks.active():  # every rank, this one included, rewinds where the agreed step ends
            target = self.guard("ranks", lambda: self.ranks.request_pause(
                brk.step, brk.phase, brk.reason, brk.condition, "rewind", to_step=snap.step))
            if target is not None:
                return
        self._plan(snap, f"break [{brk.condition}] at step {brk.step}")

    def for_rank(self, req: dict[str, Any]) -> None:
        """Every rank rewinds for one rank's break, to the snapshot that rank chose (once per step)."""
        if req["step"] <= self.rewinder.agreed_step:
            return  # another rank's request for the same rewind
        self.rewinder.agreed_step = req["step"]
        self.break_set.mark_fired(req["condition"], self.model.step)
        try:
            snap = self.rewinder.choose(self.model.step, req["to_step"])
        except NoSnapshot as e:
            self.bus.say(f"cannot rewind with rank {req['rank']}: {e}")
            return
        self._plan(snap, f"rank {req['rank']}'s break [{req['condition']}] at step {req['broke_at']}")

    def _plan(self, snap: Snapshot, cause: str) -> dict[str, Any]:
        st = self.model.ensure_step()
        if not st.optimizer_stepped:
            st.skip = True  # this step's update is dropped (were it applied, the restore undoes it)
        r = self.rewinder
        r.pending = snap
        r.rewinds += 1
        extra = {"lr_scale": r.lr_scale, "lr_steps": r.lr_steps} if r.lr_scale != 1.0 and r.lr_steps else {}
        return self.bus.change("rewind", to_step=snap.step, batches_skipped=self.model.step - snap.step + 1,
                               rewinds=r.rewinds, cause=cause, **extra)

    def at_step_end(self) -> None:
        """Where a step ends: a rewind asked for in it, or a snapshot when one is due."""
        r = self.rewinder
        taken = r.taken
        if r.at_step_end(self.model.step) is not None:
            self.break_set.forget_fired()  # (a NaN right after a rewind is a break: it rewinds further back)
        if r.taken == 1 and taken == 0:
            snap = r.snapshots[-1]
            self.bus.say(f"keeping a snapshot every {r.every} steps ({r.keep} kept): {format_size(snap.nbytes)} "
                         "each (parameters, buffers, optimizer state)")
            self.bus.write("snapshot", step=snap.step, bytes=snap.nbytes, every=r.every, keep=r.keep)
