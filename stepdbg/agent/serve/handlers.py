"""The agent's answer to every op, as ``op_<name>``: each calls the part that owns it.

The ops, their arguments and their bounds are declared once in stepdbg/wire/ops.py; the
Dispatcher checks a request's arguments against that table before the handler runs, so
bad input is refused with ``bad_args`` and a message that says what is allowed.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

from stepdbg.agent.breaks.rewind import NoSnapshot
from stepdbg.agent.measure import tensors
from stepdbg.wire import protocol
from stepdbg.wire.ops import ENDED_BY

if TYPE_CHECKING:
    from stepdbg.agent.session import Session

EVAL_OUTPUT_LIMIT = 1_000_000  # characters of what evaluated code printed or raised
CLIENT_THREAD = re.compile(r"stepdbg-client-(\d+)")  # a client's threads: stepdbg-client-N(-requests, -sender)


class Handlers:
    """Every request a client may make, as ``op_<name>``; each returns plain data."""

    def __init__(self, session: Session, peer: Any) -> None:
        self.s = session
        self.peer = peer  # the connection's state: what happens to the job when it leaves

    # state and breakpoints
    def op_status(self) -> dict[str, Any]:
        return self.s.views.status()

    def op_job_nodes(self) -> dict[str, Any]:
        """The node of every rank of this distributed job, from the job's store."""
        return {"world_size": self.s.ranks.world(), "nodes": self.s.ranks.nodes()}

    def op_breaks(self) -> list[str]:
        return self.s.breaker.break_set.specs()

    def op_break_add(self, spec: str) -> list[str]:
        from stepdbg.wire.conditions import ConditionError

        try:
            self.s.breaker.add(spec)
        except ConditionError as e:
            raise protocol.ProtocolError("bad_args", str(e)) from None
        return self.op_breaks()

    def op_breakpoints(self) -> list[dict[str, Any]]:
        return self.s.breaker.break_set.listing()

    def op_break_enable(self, spec: str, enabled: bool = True) -> list[dict[str, Any]]:
        try:
            self.s.breaker.enable(spec, bool(enabled))
        except KeyError as e:
            raise protocol.ProtocolError("bad_args", str(e.args[0])) from None
        return self.s.breaker.break_set.listing()

    def op_break_remove(self, spec: str) -> list[str]:
        try:
            self.s.breaker.remove(spec)
        except KeyError as e:
            raise protocol.ProtocolError("bad_args", str(e.args[0])) from None
        return self.op_breaks()

    # stepping
    def op_cont(self) -> None:
        self.s.controls.cont()

    def op_pause(self) -> None:
        self.s.controls.pause()

    def op_next_phase(self) -> None:
        self._not_at_exception("n")
        self.s.controls.next_phase()

    def op_next_step(self) -> None:
        self._not_at_exception("s")
        self.s.controls.next_step(self.s.step)

    def _not_at_exception(self, key: str) -> None:
        """At an uncaught exception's pause no pause point comes next: n, s and skip let the
        exception end the job, with no word (a walk: `n` at shape_error's break ended it, exit 1)."""
        brk = self.s.controls.paused
        if brk is not None and brk.phase == "exception":
            raise protocol.ProtocolError("bad_args", f"{key}: at an uncaught exception no step or pause point "
                                         "comes next; c lets the exception go on (it ends the job as it would "
                                         "plainly), q ends the job (exit code 3)")

    def op_pause_at(self, n: int) -> None:
        _refused_as_bad_args(lambda: self.s.controls.pause_at(n, self.s.step))  # (a step passed: words)

    def op_run_to_step(self, n: int) -> None:
        _refused_as_bad_args(lambda: self.s.controls.run_to_step(n, self.s.step))  # (a step not ahead: words)

    def op_end(self, by: str = "client") -> None:
        if by == "here" and not self.peer.local:  # (a client's end said on the job's terminal as its own q)
            raise protocol.ProtocolError("bad_args", "by here is the job's own console's: a client is tui, console "
                                                     "or client")
        self.s.controls.end_asked_by = ENDED_BY[by]
        self.s.end_job()

    def op_detach(self, then: str = "stay") -> None:
        self.peer.then = then

    # inspection
    def op_summary(self, name: str) -> dict[str, Any]:
        return self.s.views.summary(name)  # (a Memory row's name too)

    def op_slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        try:
            return self.s.views.slice(name, index, limit)
        except tensors.BadIndex as e:  # said in words, as a bad argument: not the agent's failure
            raise protocol.ProtocolError("bad_args", str(e)) from None

    def op_module_tree(self) -> list[dict[str, Any]]:
        return self.s.views.module_tree()

    def op_model_summary(self, depth: int = 3) -> str | None:
        return self.s.views.model_summary(depth)

    def op_optimizer(self) -> list[dict[str, Any]]:
        return self.s.views.optimizer_info()

    def op_memory(self) -> dict[str, Any]:
        return self.s.views.memory()

    def op_timings(self) -> dict[str, Any]:
        return self.s.views.timings()

    def op_history(self, last: int = 200) -> list[dict[str, Any]]:
        return list(self.s.model.history)[-last:]

    def op_source(self, context: int = 5) -> dict[str, Any] | None:
        return self.s.views.source(context)

    def op_locals(self, all: bool = False) -> list[dict[str, str]]:  # noqa: A002 - the op's argument
        return self.s.views.frame_locals(everything=all)

    def op_frames(self, move: int = 0) -> list[dict[str, Any]]:
        """The paused user frames, outermost first; `move` selects one further out (u) or in (d)."""
        try:
            return self.s.views.frames(move)
        except LookupError as e:
            raise protocol.ProtocolError("bad_args", str(e)) from None

    def op_stacks(self) -> list[dict[str, Any]]:
        """Every thread's stack; a client's threads say whether they serve the one asking
        (`info threads` listed stepdbg-client-1 and -2 with nothing to tell which was whose)."""
        asking = CLIENT_THREAD.match(threading.current_thread().name)
        out = self.s.views.stacks()
        for t in out:
            m = CLIENT_THREAD.match(str(t.get("name")))
            if m is not None and t.get("own"):
                t["serves"] = "you" if asking is not None and m.group(1) == asking.group(1) else "another client"
        return out

    def op_replay(self) -> dict[str, Any]:
        return self.s.views.replay()

    def op_diff(self) -> dict[str, Any]:
        return self.s.views.diff()

    def op_diff_compile(self, backend: str = "inductor") -> dict[str, Any]:
        return self.s.views.diff_compile(backend)

    def op_replicas(self, start: int = 0, limit: int = 1024) -> dict[str, Any]:
        return self.s.views.replicas(start, limit)

    def op_save(self) -> dict[str, Any]:
        return self.s.views.save()

    def op_complete(self, name: str, prefix: str = "") -> list[str]:
        return self.s.views.attribute_names(name, prefix)

    def op_eval(self, source: str) -> dict[str, Any]:
        r = self.s.views.evaluator.evaluate(source)
        for key in ("output", "error"):  # what user code prints or raises can be any size
            text = r.get(key) or ""
            if len(text) > EVAL_OUTPUT_LIMIT:
                cut = len(text) - EVAL_OUTPUT_LIMIT
                r[key] = text[:EVAL_OUTPUT_LIMIT] + f"\n[stepdbg: {cut} more characters not shown]\n"
        return r

    def op_interrupt(self) -> dict[str, Any]:
        """Ctrl-C for code being evaluated: answered at once, from this thread."""
        return {"interrupted": self.s.views.evaluator.interrupt()}

    def op_interrupt_job(self) -> dict[str, Any]:
        """Ctrl-C for the job itself (SIGINT): its own handling runs. Said once, by the change
        every client is told of before the signal (it was said twice, in two words)."""
        return self.s.controls.interrupt_job()

    # changes
    def op_set_lr(self, lr: float, group: int | None = None, pin: bool = False) -> dict[str, Any]:
        return _refused_as_bad_args(lambda: self.s.changer.set_lr(lr, group, pin))

    def op_set_param_group(self, key: str, value: float, group: int | None = None) -> dict[str, Any]:
        return _refused_as_bad_args(lambda: self.s.changer.set_param_group(key, value, group))

    def op_skip(self) -> dict[str, Any]:
        self._not_at_exception("skip")
        return self.s.changer.skip_step()

    def op_rewind(self, step: int | None = None) -> dict[str, Any]:
        try:
            return self.s.rewinds.asked() if step is None else self.s.rewinds.asked(step)
        except NoSnapshot as e:  # nothing to rewind to, or no snapshot of the step asked for: said in words
            raise protocol.ProtocolError("bad_args", str(e)) from None

    def op_snapshots(self) -> list[dict[str, Any]]:
        return self.s.rewinder.listing()


def _refused_as_bad_args(change: Any) -> Any:
    """A change the job refuses (no such group, not a number there) is the caller's bad argument."""
    try:
        return change()
    except (ValueError, KeyError) as e:
        raise protocol.ProtocolError("bad_args", str(e.args[0]) if e.args else str(e)) from None
