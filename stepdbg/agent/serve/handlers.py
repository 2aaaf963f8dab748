"""Every request a client may make, as ``op_<name>``, with the arguments it may carry.

Each handler declares its arguments (``@takes``); the dispatcher checks them before the
handler runs, so bad input is refused with ``bad_args`` and a message that says what is
allowed, and no request can make the job allocate past the limits below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stepdbg.wire import protocol
from stepdbg.wire.schema import Choice, Flag, Int, Maybe, Num, Text, takes

if TYPE_CHECKING:
    from stepdbg.agent.session import Session

EVAL_OUTPUT_LIMIT = 1_000_000
# What one request may ask for (README, Security): each bounds what the job allocates to answer.
SLICE_LIMIT = 10_000  # tensor values in one slice
HISTORY_LIMIT = 10_000  # steps of history (all that is kept)
SOURCE_CONTEXT_LIMIT = 200  # lines either side of the paused line
EVAL_SOURCE_LIMIT = 100_000  # characters of code to evaluate
LR_LIMIT = 1e4  # a learning rate above this is a typo, and near 1e308 it overflows the update
HYPERPARAM_LIMIT = 1e6
SPEC = Text(500)
EXPR = Text(2_000)
STEP = Int(0, 2**53)
GROUP = Int(0, 10_000)


class Handlers:
    """Every request a client may make, as ``op_<name>``; each returns plain data."""

    def __init__(self, session: Session, peer: Any) -> None:
        self.s = session
        self.peer = peer  # the connection's state: what happens to the job when it leaves

    # state and breakpoints
    def op_status(self) -> dict[str, Any]:
        return self.s.status()

    def op_job_nodes(self) -> dict[str, Any]:
        """The node of every rank of this distributed job, from the job's store."""
        return {"world_size": self.s.ranks.world(), "nodes": self.s.ranks.nodes()}

    def op_breaks(self) -> list[str]:
        return [c.spec for c in self.s.conditions]

    @takes(spec=SPEC)
    def op_break_add(self, spec: str) -> list[str]:
        from stepdbg.wire.conditions import ConditionError

        try:
            self.s.add_break(spec)
        except ConditionError as e:
            raise protocol.ProtocolError("bad_args", str(e)) from None
        return self.op_breaks()

    def op_breakpoints(self) -> list[dict[str, Any]]:
        return self.s.breakpoints()

    @takes(spec=SPEC, enabled=Flag())
    def op_break_enable(self, spec: str, enabled: bool = True) -> list[dict[str, Any]]:
        try:
            self.s.enable_break(spec, bool(enabled))
        except KeyError as e:
            raise protocol.ProtocolError("bad_args", str(e.args[0])) from None
        return self.s.breakpoints()

    @takes(spec=SPEC)
    def op_break_remove(self, spec: str) -> list[str]:
        try:
            self.s.remove_break(spec)
        except KeyError as e:
            raise protocol.ProtocolError("bad_args", str(e.args[0])) from None
        return self.op_breaks()

    # stepping
    def op_cont(self) -> None:
        self.s.cont()

    def op_pause(self) -> None:
        self.s.pause()

    def op_next_phase(self) -> None:
        self.s.next_phase()

    def op_next_step(self) -> None:
        self.s.next_step()

    @takes(n=STEP)
    def op_pause_at(self, n: int) -> None:
        self.s.pause_at(n)

    @takes(n=STEP)
    def op_run_to_step(self, n: int) -> None:
        self.s.run_to_step(n)

    def op_end(self) -> None:
        self.s.end()

    @takes(then=Choice(("stay", "continue", "end")))
    def op_detach(self, then: str = "stay") -> None:
        self.peer.then = then

    # inspection
    @takes(name=EXPR)
    def op_summary(self, name: str) -> dict[str, Any]:
        return self.s.summary(name)

    @takes(name=EXPR, index=Text(200), limit=Int(1, SLICE_LIMIT))
    def op_slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        return self.s.slice(name, index, limit)

    def op_module_tree(self) -> list[dict[str, Any]]:
        return self.s.module_tree()

    @takes(depth=Int(0, 10))
    def op_model_summary(self, depth: int = 3) -> str | None:
        return self.s.model_summary(depth)

    def op_optimizer(self) -> list[dict[str, Any]]:
        return self.s.optimizer_info()

    def op_memory(self) -> dict[str, Any]:
        return self.s.memory()

    def op_timings(self) -> dict[str, Any]:
        return self.s.timings()

    @takes(last=Int(1, HISTORY_LIMIT))
    def op_history(self, last: int = 200) -> list[dict[str, Any]]:
        return list(self.s.history)[-last:]

    @takes(context=Int(0, SOURCE_CONTEXT_LIMIT))
    def op_source(self, context: int = 5) -> dict[str, Any] | None:
        return self.s.source(context)

    @takes(all=Flag())
    def op_locals(self, all: bool = False) -> list[dict[str, str]]:  # noqa: A002 - the op's argument
        return self.s.frame_locals(everything=all)

    @takes(move=Int(-10_000, 10_000))
    def op_frames(self, move: int = 0) -> list[dict[str, Any]]:
        """The paused user frames, outermost first; `move` selects one further out (u) or in (d)."""
        try:
            return self.s.frames(move)
        except LookupError as e:
            raise protocol.ProtocolError("bad_args", str(e)) from None

    def op_stacks(self) -> list[dict[str, Any]]:
        return self.s.stacks()

    def op_replay(self) -> dict[str, Any]:
        return self.s.replay()

    @takes(source=Text(EVAL_SOURCE_LIMIT))
    def op_eval(self, source: str) -> dict[str, Any]:
        r = self.s.evaluate(source)
        for key in ("output", "error"):  # what user code prints or raises can be any size
            text = r.get(key) or ""
            if len(text) > EVAL_OUTPUT_LIMIT:
                cut = len(text) - EVAL_OUTPUT_LIMIT
                r[key] = text[:EVAL_OUTPUT_LIMIT] + f"\n[stepdbg: {cut} more characters not shown]\n"
        return r

    def op_interrupt(self) -> dict[str, Any]:
        """Ctrl-C for code being evaluated: answered at once, from this thread."""
        return {"interrupted": self.s.interrupt()}

    def op_interrupt_job(self) -> dict[str, Any]:
        """Ctrl-C for the job itself (SIGINT): its own handling runs."""
        return self.s.interrupt_job()

    # changes
    @takes(lr=Num(0.0, LR_LIMIT), group=Maybe(GROUP), pin=Flag())
    def op_set_lr(self, lr: float, group: int | None = None, pin: bool = False) -> dict[str, Any]:
        return _refused_as_bad_args(lambda: self.s.set_lr(lr, group=group, pin=pin))

    @takes(key=Text(64), value=Num(0.0, HYPERPARAM_LIMIT), group=Maybe(GROUP))
    def op_set_param_group(self, key: str, value: float, group: int | None = None) -> dict[str, Any]:
        return _refused_as_bad_args(lambda: self.s.set_param_group(key, value, group=group))

    def op_skip(self) -> dict[str, Any]:
        return self.s.skip_step()

    @takes(step=Maybe(STEP))
    def op_rewind(self, step: int | None = None) -> dict[str, Any]:
        return self.s.rewind(step)

    def op_snapshots(self) -> list[dict[str, Any]]:
        return self.s.rewinder.listing()


def _refused_as_bad_args(change: Any) -> Any:
    """A change the job refuses (no such group, not a number there) is the caller's bad argument."""
    try:
        return change()
    except (ValueError, KeyError) as e:
        raise protocol.ProtocolError("bad_args", str(e.args[0]) if e.args else str(e)) from None
