"""What a paused (or running) step shows, as front ends ask for it.

A mixin of ``Session`` (session.py): summaries, evaluation, the module tree, optimizer,
memory, timings, source, stacks, status and the replay, each from the part that knows.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from stepdbg.agent.measure import threads
from stepdbg.agent.measure.memory import memory
from stepdbg.agent.views import inspection

if TYPE_CHECKING:
    from stepdbg.agent.breaks.changes import Changes
    from stepdbg.agent.breaks.controls import Controls
    from stepdbg.agent.breaks.ranks import Ranks
    from stepdbg.agent.measure.frames import PausedStack
    from stepdbg.agent.report import Report
    from stepdbg.agent.step.step_model import StepModel
    from stepdbg.agent.views.evaluate import Evaluator

WAIT_SHOWN_AFTER = 1.0  # seconds without progress before status() says where the loop waits


class ViewOps:
    """Inspection of the paused step; status of the running one."""

    model: StepModel
    controls: Controls
    changer: Changes
    evaluator: Evaluator
    ranks: Ranks
    report: Report
    guard: Any
    pid: int
    argv: list[str]
    actions: list[str]
    breaks: list[Any]
    replays: list[dict[str, Any]]
    paused_stack: PausedStack

    def namespace(self) -> dict[str, Any]:
        return self.evaluator.namespace()

    def summary(self, name: str) -> dict[str, Any]:
        return self.evaluator.summary(name)

    def slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        return self.evaluator.slice(name, index, limit)

    def evaluate(self, source: str) -> dict[str, Any]:
        return self.evaluator.evaluate(source)

    def interrupt(self) -> bool:
        """Stop the code a front end is evaluating in the paused frame (the job stays paused)."""
        return self.evaluator.interrupt()

    def module_tree(self) -> list[dict[str, Any]]:
        return self.on_training_thread(lambda: inspection.module_tree(self.model))

    def model_summary(self, depth: int = 3) -> str | None:
        """torchinfo's summary table on the captured batch."""
        return self.on_training_thread(lambda: inspection.model_summary(self.model, depth))

    def optimizer_info(self) -> list[dict[str, Any]]:
        return inspection.optimizer_info(list(self.model.optimizers), list(self.model.schedulers), self.changer.pins)

    def memory(self) -> dict[str, Any]:
        """Host and CUDA memory, and the snapshots kept for a rewind (rewind.py)."""
        r = self.rewinder
        return {**memory(), "snapshots": r.listing(), "keep_every": r.every, "keep": r.keep}

    def timings(self) -> dict[str, Any]:
        st = self.model.current
        return {"current": dict(st.phase_times) if st else {}, "history": [
            {k: h[k] for k in ("step", "step_time", "data_wait")} for h in list(self.history)[-100:]]}

    def source(self, context: int = 5) -> dict[str, Any] | None:
        st = self.paused_stack
        return inspection.source_around(st.selected(), context, st.selected_line())

    def frame_locals(self, everything: bool = False) -> list[dict[str, str]]:
        """The selected frame's locals: yours first (tensors by size), then, with
        `everything`, dunders, modules, functions and classes."""
        return inspection.frame_locals(self.paused_stack.selected(), everything=everything)

    def frames(self, move: int = 0) -> list[dict[str, Any]]:
        """The user's frames at the pause, outermost first, after selecting the frame
        `move` out (negative: in), as pdb's u and d; the selected one is marked."""
        if move:
            self.paused_stack.move(move)
        return self.paused_stack.listing()

    def stacks(self) -> list[dict[str, Any]]:
        return threads.thread_stacks(self.model.thread)

    def status(self) -> dict[str, Any]:
        st = self.model.current
        return {
            "pid": self.pid, "argv": self.argv, "step": self.step,
            "phase": st.phase if st else "between steps",
            "state": "paused" if self.paused else "running",
            "frontends": self.frontends,
            "paused": asdict(self.paused) if self.paused else None,
            "waiting": self.guard("waiting", self.waiting),
            "breaks": self.break_specs(), "actions": self.actions,
        }

    def waiting(self) -> dict[str, Any] | None:
        """Where the training thread waits when it has made no progress for a second (a
        stalled loader, a collective waiting for another rank); in a collective, how long
        it has before the process-group timeout ends the job."""
        m = self.model
        if self.paused is not None or m.thread is None:
            return None
        idle = time.monotonic() - m.last_progress
        frame = sys._current_frames().get(m.thread)
        if idle < WAIT_SHOWN_AFTER or frame is None:
            return None
        multi = self.ranks.active()
        out = {"idle_s": round(idle, 1), **threads.blocked_in(frame, multi), "timeout_s": None, "left_s": None}
        if out["collective"] and multi:
            timeout = self.ranks.timeout_at(m.last_progress)
            if timeout is not None:
                out["timeout_s"], out["left_s"] = timeout, round(max(0.0, timeout - idle), 1)
        return out

    def replay(self) -> dict[str, Any]:
        """Replay the step under anomaly detection and per-module checks; report the producer."""
        from stepdbg.agent.replay.replay import replay_step

        def run() -> dict[str, Any]:
            result = replay_step(self.model, self.breaks[-1] if self.breaks else None,
                                 self.paused_stack.innermost())
            self.replays.append(result)
            self.report.write("replay", **result)
            self.emit("replay", result)
            first = result.get("first_nonfinite")
            advice = result.get("advice")
            self.say(f"replay of step {result['step']}: {result['summary']}"
                     + (f"\n  {first['code']}" if first and first.get("code") else "")
                     + (f"\n  {advice['cause']}: {advice['text']}" if advice else ""))
            return result

        return self.on_training_thread(run)
