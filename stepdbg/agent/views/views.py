"""What a paused (or running) step shows, as front ends ask for it: summaries, evaluation,
the module tree, optimizer, memory, timings, source, frames, stacks, status and the
replay, each from the part that knows. Safe to call from any thread: what must run on the
training thread is handed to it (Controls.on_training_thread).
"""

from __future__ import annotations

import os
import pickle
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from stepdbg.agent.breaks.breaker import Breaker
from stepdbg.agent.breaks.changes import Changes
from stepdbg.agent.breaks.controls import Controls
from stepdbg.agent.breaks.ranks import Ranks
from stepdbg.agent.breaks.rewind import Rewinder
from stepdbg.agent.breaks.told import told
from stepdbg.agent.bus import Bus
from stepdbg.agent.measure import census, oom, tensors, threads
from stepdbg.agent.measure.memory import memory, memory_in_use
from stepdbg.agent.step.step_model import StepModel
from stepdbg.agent.step.step_state import begun
from stepdbg.agent.views import completion, inspection, locals_view
from stepdbg.agent.views.evaluate import Evaluator, slice_of
from stepdbg.wire.protocol import NotPaused, ProtocolError
from stepdbg.wire.replay_text import ON_BREAK

JOIN_S = 20.0  # seconds a rank waits for the others to join a replay of a sharded model
WAIT_SHOWN_AFTER = 1.0  # seconds without progress before status() says where the loop waits


FRAME_NAMED = ("batch", "other_tensors")  # census categories whose rows a frame's variable may name


def _is_expression(name: str) -> bool:
    """Whether `name` is Python a frame evaluates (not a census row's 'x (2)', the second x)."""
    if name.endswith(")") and name.rpartition(" (")[2][:-1].isdigit():
        return False
    try:
        compile(name, "<stepdbg>", "eval")
    except SyntaxError:
        return False
    return True


# What status says of the last break's replay: what a front end shows of it (its summary and
# verdict, where the value is born, the advice), not all it found (ops_seen, notes).
REPLAY_SAID = ("step", "summary", "verdict", "reproduced", "first_nonfinite", "failing_op", "advice", "asked_by")


class Views:
    """Inspection of the paused step; status of the running one."""

    def __init__(self, model: StepModel, controls: Controls, changer: Changes, rewinder: Rewinder, ranks: Ranks,
                 breaker: Breaker, bus: Bus, guard: Any, argv: list[str]) -> None:
        self.model, self.controls, self.changer, self.rewinder = model, controls, changer, rewinder
        self.ranks, self.breaker, self.bus, self.guard, self.argv = ranks, breaker, bus, guard, argv
        self.pid = os.getpid()
        self.evaluator = Evaluator(model, controls, lambda: breaker.paused_stack.selected(),
                                   end=lambda code, why: breaker.hooks.stop(code, why) if breaker.hooks else None)
        self.replays: list[dict[str, Any]] = []
        self._replayed: tuple[Any, dict[str, Any]] | None = None  # (the pause, its step's last replay there)
        self.bundle_dir: str | None = None  # --bundle-dir (None: the job's working directory)
        self._pause_began: tuple[Any, int] = (None, 0)  # the pause and how many changes the job had made before it
        self.bundles = 0  # written by this process (bundle.MAX_BUNDLES at most)
        self._census: tuple[Any, dict[str, Any], dict[str, Any]] | None = None  # (pause, census, refs)
        self._last_said: tuple[tuple[Any, int], dict[str, Any]] | None = None  # ((break, replays), _last_break's)
        bus.listeners.append(self._on_event)

    def _on_event(self, event: str, data: Any) -> None:
        if event == "paused":
            self._pause_began = (data, len(self.bus.changes))

    def counted(self, name: str) -> Any:
        """The tensor of one of this pause's memory census rows by its name ('head.0.weight',
        "AddmmBackward0 in loss's graph", 'opt.state[head.0.weight].exp_avg'), else None. A row
        named by a paused frame's variable ('x', 'kept[3]') is not: the selected frame answers
        that name (after `u`, `p x` showed the innermost frame's x, where `x.shape` said NameError)."""
        if not (self._census and self._census[0] is self.controls.paused):
            return None
        ref = self._census[2].get(name)
        row = next((r for r in self._census[1]["largest"] if r["name"] == name), None)
        if ref is None or (row is not None and row["category"] in FRAME_NAMED and _is_expression(name)):
            return None
        return ref()

    def summary(self, name: str) -> dict[str, Any]:
        """A tensor's summary: one of the memory census's largest by its name (a parameter's
        optimizer state, a saved activation), else any expression in the paused frame."""
        t = self.counted(name)
        if t is not None:
            return self.controls.on_training_thread(lambda: tensors.summarize(t, name))
        return self.evaluator.summary(name)

    def slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        """The values at `index` of a census row's tensor by its name, else of an expression."""
        t = self.counted(name)
        if t is not None:
            return self.controls.on_training_thread(lambda: slice_of(t, name, index, limit))
        return self.evaluator.slice(name, index, limit)

    def evaluate(self, source: str) -> dict[str, Any]:
        return self.evaluator.evaluate(source)

    def interrupt(self) -> bool:
        """Stop the code a front end is evaluating in the paused frame (the job stays paused)."""
        return self.evaluator.interrupt()

    def module_tree(self) -> list[dict[str, Any]]:
        return self.controls.on_training_thread(lambda: inspection.module_tree(self.model))

    def model_summary(self, depth: int = 3) -> str | None:
        """torchinfo's summary table on the captured batch."""
        return self.controls.on_training_thread(lambda: inspection.model_summary(self.model, depth))

    def optimizer_info(self) -> list[dict[str, Any]]:
        return inspection.optimizer_info(list(self.model.optimizers), list(self.model.schedulers), self.changer.pins,
                                         self.changer.base_was)

    def memory(self) -> dict[str, Any]:
        """Host and CUDA memory; at a pause, memory by category and the largest tensors
        (census.py, counted once per pause); the snapshots kept for a rewind (rewind.py)."""
        r = self.rewinder
        out = {**memory(), "snapshots": r.listing(), "keep_every": r.every, "keep": r.keep,
               "step": self.model.step, "now": memory_in_use(), "by_category": None,
               "record_memory": self.model.saved is not None}
        paused = self.controls.paused
        if paused is None:
            return out
        if self._census is None or self._census[0] is not paused:
            counted = self.controls.on_training_thread(
                lambda: census.of_step(self.model, [f for f, _ in self.breaker.paused_stack.frames]))
            self._census = (paused, counted, counted.pop("refs"))
        counted = self._census[1]
        for d in out["cuda"]:
            used = sum(counted["by_device"].get(f"cuda:{d['device']}", {}).values())
            d["unattributed"] = max(0, d["allocated"] - used)
        return {**out, **counted, "step": paused.step, "memory_snapshot": paused.details.get("memory_snapshot"),
                "oom": paused.details.get("oom")}

    def timings(self) -> dict[str, Any]:
        st = self.model.current
        return {"current": dict(st.phase_times) if st else {}, "history": [
            {k: h[k] for k in ("step", "step_time", "data_wait")} for h in list(self.model.history)[-100:]]}

    def source(self, context: int = 5) -> dict[str, Any] | None:
        st = self.breaker.paused_stack
        return inspection.source_around(st.selected(), context, st.selected_line())

    def frame_locals(self, everything: bool = False) -> list[dict[str, str]]:
        """The selected frame's locals: yours first (tensors by size), then, with
        `everything`, dunders, modules, functions and classes, read while the training thread
        waits, each value's user code within its time (locals_view); running, there are none."""
        def run() -> list[dict[str, str]]:
            return locals_view.frame_locals(self.breaker.paused_stack.selected(), everything=everything)

        try:
            return self.controls.on_training_thread(run)
        except NotPaused:
            return []

    def attribute_names(self, name: str, prefix: str = "") -> list[str]:
        """The attributes of `name` (dotted) of the selected frame that begin with `prefix`,
        read by completion.py without running the user's code (Tab after a dot)."""
        def run() -> list[str]:
            try:
                return completion.frame_names(self.breaker.paused_stack.selected(), name, prefix)
            except completion.NotHere as e:
                raise ProtocolError("bad_args", str(e)) from None

        return self.controls.on_training_thread(run)

    def frames(self, move: int = 0) -> list[dict[str, Any]]:
        """The user's frames at the pause, outermost first, after selecting the frame
        `move` out (negative: in), as pdb's u and d; the selected one is marked."""
        if move:
            self.breaker.paused_stack.move(move)
        return self.breaker.paused_stack.listing()

    def stacks(self) -> list[dict[str, Any]]:
        return threads.thread_stacks(self.model.thread)

    def status(self) -> dict[str, Any]:
        st = begun(self.model.current)
        return {
            "pid": self.pid, "argv": self.argv, "step": self.model.step,
            "phase": st.phase if st else "between steps",
            "state": "paused" if self.controls.paused else "running",
            "frontends": self.controls.frontends,
            "paused": {**told(self.controls.paused), "skip_step": self._skip_pending(), "lr_now": self._lr_now(),
                       "replayed": self._replayed_here()}
            if self.controls.paused else None,
            "waiting": self.guard("waiting", self.waiting),
            "loader": self.guard("loader", self.loader),
            "stall": self.breaker.stall_report(),
            "breaks": self.breaker.break_set.specs(), "actions": self.breaker.actions,
            **({"last_break": last} if not self.controls.paused and (last := self._last_break()) else {}),
        }

    def _last_break(self) -> dict[str, Any] | None:
        """The job's last break in short, and the replay of its step (the last, where one ran
        after it): a client attached while the job ran on after a break said `running — no
        break yet` and its Log nothing of it (the walk of 08:30's 2; the end says it too:
        serve/exited.py). Said while it runs (paused, `paused` says the break, and `replayed`
        the replay at it); made once per break and replay (status is polled)."""
        breaks, replays = self.breaker.breaks, self.replays
        if not breaks:
            return None
        if self._last_said is None or self._last_said[0][0] is not breaks[-1] or self._last_said[0][1] != len(replays):
            b = breaks[-1]
            replay = replays[-1] if replays and replays[-1].get("step") == b.step else None
            self._last_said = ((b, len(replays)), told({  # (an error's message can be megabytes: told.py)
                "step": b.step, "phase": b.phase, "condition": b.condition, "reason": b.reason, "where": b.where,
                "at": b.at, "details": {k: v for k, v in b.details.items() if k in ("for_rank", "broke_at", "broke")},
                "replay": {k: replay[k] for k in REPLAY_SAID if k in replay} if replay else None}))
        return self._last_said[1]

    def _skip_pending(self) -> int | None:
        """The step whose update will be skipped (k, skip, --on-break skip), as every client
        reads it from the job (the Break panel said nothing: a toast of one window alone)."""
        cur = self.model.current
        return cur.index if cur is not None and cur.skip and not cur.optimizer_stepped else None

    def _replayed_here(self) -> dict[str, Any] | None:
        """The replay run at this pause (whichever client asked), its step and answer in
        short: every client's words follow it (`info status` and the Ranks panel still asked
        for a replay another client had run; the closing walk of 05:50's 4 and 7)."""
        if self._replayed is None or self._replayed[0] is not self.controls.paused:
            return None
        return told({k: self._replayed[1][k] for k in REPLAY_SAID if k in self._replayed[1]})

    def _lr_now(self) -> dict[str, Any] | None:
        """The LR set at this pause (l, lr, at any client): the last such change record, which
        every client's Break panel says beside the LR at the break (the window that set it
        alone said it, from the change event; a client attached later had no sign of it)."""
        brk, before = self._pause_began
        if brk is None or brk is not self.controls.paused:
            return None
        return next((c for c in reversed(self.bus.changes[before:]) if c.get("what") == "lr"), None)

    def loader(self) -> dict[str, Any] | None:
        """The DataLoader the job reads from now: its settings and its workers' process
        states (the Threads panel shows them: a data-wait break's hint sends the person there)."""
        ref = self.model.capture.get("loader")
        it = ref() if ref is not None else None
        return threads.loader_settings(it) if it is not None else None

    def waiting(self) -> dict[str, Any] | None:
        """Where the training thread waits when it has made no progress for a second (a
        stalled loader, a collective waiting for another rank); in a collective, how long
        it has before the process-group timeout ends the job."""
        m = self.model
        if self.controls.paused is not None or m.thread is None:
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

    def replay(self, alone: bool = False, action: bool = False) -> dict[str, Any]:
        """Replay the step under anomaly detection and per-module checks; report the producer.
        `alone` (the --on-break action, on the rank that broke): a sharded model is not
        replayed, rather than wait for ranks that are not replaying. `action`: no client
        asked (its `asked_by` says so: the front ends say who did)."""
        from stepdbg.agent.replay.replay import replay_step, replay_words

        def run() -> dict[str, Any]:
            breaks = self.breaker.breaks
            together = (lambda: self.ranks.join("replay", self.model.step, JOIN_S)) \
                if self.ranks.active() and not alone else None
            agree = (lambda ready: self.ranks.agree("replay-backward", self.model.step, ready, 3 * JOIN_S)) \
                if together is not None else None
            result = replay_step(self.model, breaks[-1] if breaks else None,
                                 self.breaker.paused_stack.innermost(), together, agree)
            result.update({"asked_by": ON_BREAK} if action else {})
            # The pause it is at; the --on-break action's runs before its break's pause, at that break.
            here = self.controls.paused or (breaks[-1] if breaks else None)
            before = self._replayed  # (the same pause's finding again: one line, as the TUI's Log says it)
            again = before is not None and before[0] is here and _finding(before[1]) == _finding(result)
            self.replays.append(result)
            self._replayed = (here, result)
            self.bus.write("replay", **result)
            self.bus.emit("replay", result)
            self.bus.say(f"replay of step {result['step']} again: the same finding" if again else replay_words(result))
            return result

        return self.controls.on_training_thread(run)

    def sharded(self) -> bool:
        """The model's parameters are sharded across ranks: its forward gathers them from every rank."""
        from stepdbg.agent.replay.replay import eager_root

        root = eager_root(self.model)
        return root is not None and tensors.sharded_across_ranks(root) is not None

    def diff(self) -> dict[str, Any]:
        """The paused step run twice from the same state: where the runs part (diff/twice.py)."""
        from stepdbg.agent.diff.twice import step_twice

        def run() -> dict[str, Any]:
            result = step_twice(self.model)
            self.bus.write("diff", **result)
            self.bus.say(f"diff: {result['summary']}")
            return result

        return self.controls.on_training_thread(run)

    def diff_compile(self, backend: str) -> dict[str, Any]:
        """The paused step's forward eagerly and compiled: the first module that differs (diff/compiled.py)."""
        from stepdbg.agent.diff.compiled import compile_diff

        def run() -> dict[str, Any]:
            result = compile_diff(self.model, backend, say=self.bus.say)
            self.bus.write("diff_compile", **result)
            self.bus.say(f"diff compile: {result['summary']}")
            return result

        return self.controls.on_training_thread(run, timeout=1800)

    def replicas(self, start: int = 0, limit: int = 1024) -> dict[str, Any]:
        """A page of this rank's parameters' and gradients' fingerprints, for `diff ranks`
        to compare replicas (diff/replicas.py); read on the paused training thread."""
        from stepdbg.agent.diff.replicas import replica_page

        def run() -> dict[str, Any]:
            brk = self.controls.paused
            rank = self.ranks.rank if self.ranks.active() else None
            return {"rank": rank, "world_size": self.ranks.world(), "step": brk.step if brk else self.model.step,
                    "phase": brk.phase if brk else None, "paused_at": brk.at if brk else None,
                    **replica_page(self.model, start, limit, brk.phase if brk else None)}

        return self.controls.on_training_thread(run)

    def save(self) -> dict[str, Any]:
        """Write the paused step's evidence bundle (bundle.py) under --bundle-dir: its path,
        or why it was not written. The job goes on whatever happens here."""
        from stepdbg.agent.replay import bundle
        from stepdbg.agent.replay.autograd_graph import finite
        from stepdbg.agent.replay.replay import eager_root

        def run() -> dict[str, Any]:
            m, breaks = self.model, self.breaker.breaks
            root, step = eager_root(m), m.capture.get("step", m.step)
            if root is None or m.capture.get("args") is None:
                return self._not_saved(step, "no model forward was seen in this step")
            if self.bundles >= bundle.MAX_BUNDLES:
                return self._not_saved(step, f"this run saved {bundle.MAX_BUNDLES} bundles already (the cap)")
            rank = self.ranks.rank if self.ranks.active() else None
            name = f"stepdbg-step{step}" + (f"-rank{rank}" if rank is not None else "")
            directory = Path(self.bundle_dir or os.getcwd())
            self.bus.say(f"saving the evidence bundle of step {step} "
                         f"({oom.size(bundle.size_of(root))} of parameters and buffers) under {directory}")
            out = m.output()
            extra = {"optimizers": list(m.optimizers), "snapshots": self.rewinder.snapshots, "rank": rank,
                     "output_finite": None if out is None else finite(out),
                     "history": list(m.history), "argv": self.argv, "name": m.root_name(root)}
            brk = asdict(breaks[-1]) if breaks else {}
            try:
                path = bundle.write(directory, name, root, m.capture, brk, extra)
            except OSError as e:  # a full disk, a read-only folder: the cause in words; nothing of it is left
                return self._not_saved(step, f"{e.strerror or type(e).__name__} ({directory}); nothing was written")
            except (bundle.BundleError, RuntimeError, pickle.PicklingError) as e:
                return self._not_saved(step, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            self.bundles += 1
            record = self.bus.write("bundle", step=step, path=str(path), saved=True)
            self.bus.say(f"evidence bundle: {path} (replay it: stepdbg replay {shlex.quote(str(path))})")
            return record

        return self.controls.on_training_thread(run)

    def _not_saved(self, step: int, why: str) -> dict[str, Any]:
        self.bus.say(f"evidence bundle of step {step} not saved: {why}")
        return self.bus.write("bundle", step=step, path=None, saved=False, error=why)


def _finding(result: dict[str, Any]) -> tuple[Any, Any]:
    """What a replay found, as said: its summary and verdict."""
    return result.get("summary"), result.get("verdict")
