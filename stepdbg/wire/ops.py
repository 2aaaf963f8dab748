"""Every op a client may send, declared once: its name, its arguments (type, range, size),
what it returns and one line of doc.

From this table come the agent's argument checks (``SCHEMAS``, read by the Dispatcher),
the client's methods (``OpCalls``: the sync Client, the AsyncClient and the in-process
console's caller all inherit them), and docs/protocol.md's op table (``markdown_table``; a
test keeps docs/protocol.md in step). The agent answers each op with ``op_<name>`` in
stepdbg/agent/serve/handlers.py; a test checks that every op here has one and no other.
Standard library only.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from stepdbg.wire.conditions import MAX_SPEC
from stepdbg.wire.schema import Choice, Flag, Int, Maybe, Num, SchemaError, Spec, Text

# What one request may ask for (docs/security.md): each bounds what the job allocates to answer.
SLICE_LIMIT = 10_000  # tensor values in one slice
HISTORY_LIMIT = 10_000  # steps of history (all that is kept)
SOURCE_CONTEXT_LIMIT = 200  # lines either side of the paused line
REPLICAS_PAGE = 4096  # fingerprints in one answer of `replicas` (about 0.6 KB each)
EVAL_SOURCE_LIMIT = 100_000  # characters of code to evaluate
LR_LIMIT = 1e4  # a learning rate above this is a typo, and near 1e308 it overflows the update
HYPERPARAM_LIMIT = 1e6
SPEC, EXPR, LR = Text(MAX_SPEC), Text(2_000), Num(0.0, LR_LIMIT)  # (SPEC: what --break takes, no more)
STEP, GROUP = Int(0, 2**53), Int(0, 10_000)
REQUIRED: Any = inspect.Parameter.empty


@dataclass(frozen=True)
class Arg:
    name: str  # on the wire
    spec: Spec
    default: Any = REQUIRED
    param: str = ""  # the client method's parameter, where its name differs (locals: all -> everything)


@dataclass(frozen=True)
class Op:
    name: str
    doc: str
    returns: str
    args: tuple[Arg, ...] = ()
    method: str = ""  # the client's method, where its name differs from the op's
    resumes: bool = False  # the job goes on: the client forgets the pause it knew
    broadcast: bool = False  # on a job of many ranks it goes to every rank (stepping and changes, so
    #                          that the replicas stay the same), else to the rank in view
    whole_job: bool = False  # to every live rank whatever `o` chose (the job's end: not a rank's command)
    timeout: float | None = 300  # seconds a client waits for the answer


def _op(name: str, doc: str, returns: str = "null", *args: Arg, **how: Any) -> Op:
    return Op(name, doc, returns, tuple(args), **how)


# Who asked for the job's end, as the job says it on its stderr (`end`'s `by`): the launcher's
# terminal said `as asked by a front end (the TUI's q then e, or end or q at a console)`, a list
# where it could name the one (the nineteenth walk's leftover).
ENDED_BY = {"tui": "the TUI (q then e)", "console": "a console (q or end)", "here": "the console at this terminal (q)",
            "client": "a front end (the TUI's q then e, or end or q at a console)"}

OPS: dict[str, Op] = {op.name: op for op in (
    # state and breakpoints
    _op("status", "pid, argv, step, phase, paused or running, the break, where a running loop waits", "object"),
    _op("job_nodes", "the node of every rank of a distributed job, from the job's store", "object"),
    _op("breaks", "the breakpoints' specs", "list of str", method="break_specs"),
    _op("break_add", "add a breakpoint (a condition spec); bad specs are refused with the reason", "list of str",
        Arg("spec", SPEC), method="add_break", broadcast=True),
    _op("breakpoints", "each breakpoint: spec, kind, where it is checked, whether it is on", "list of objects"),
    _op("break_enable", "turn a breakpoint on or off", "list of objects",
        Arg("spec", SPEC), Arg("enabled", Flag(), True), method="enable_break", broadcast=True),
    _op("break_remove", "remove a breakpoint", "list of str", Arg("spec", SPEC), method="remove_break", broadcast=True),
    # stepping
    _op("cont", "continue to the next break", resumes=True, broadcast=True),
    _op("pause", "pause at the next pause point"),
    _op("next_phase", "continue to the next pause point", resumes=True, broadcast=True),
    _op("next_step", "continue to the same pause point of the next step", resumes=True, broadcast=True),
    _op("pause_at", "pause at step n's before_optimizer_step", "null", Arg("n", STEP)),
    _op("run_to_step", "continue to step n", "null", Arg("n", STEP), resumes=True, broadcast=True),
    _op("end", "end the job (exit code 3): at once if paused, else at the next pause point; by: who asks, as the "
        "job says it ends", "null", Arg("by", Choice(tuple(ENDED_BY)), "client"), resumes=True, broadcast=True,
        whole_job=True),
    _op("detach", "this client leaves; then: stay (a paused job waits), continue, or end", "null",
        Arg("then", Choice(("stay", "continue", "end")), "stay"), timeout=5),
    # inspection
    _op("summary", "a tensor's shape, dtype, device, stats, norm, NaN/Inf counts (any expression)", "object",
        Arg("name", EXPR)),
    _op("slice", "a tensor's values, indexed (e.g. '0, :8')", "nested list",
        Arg("name", EXPR), Arg("index", Text(200), ""), Arg("limit", Int(1, SLICE_LIMIT), 256)),
    _op("module_tree", "one row per module: path, type, params, output shape, norms, mode", "list of objects"),
    _op("model_summary", "torchinfo's summary table on the captured batch", "str or null",
        Arg("depth", Int(0, 10), 3)),
    _op("optimizer", "each param group: LR, hyperparameters, state, pins; the schedulers", "list of objects",
        method="optimizer_info"),
    _op("memory", "host and CUDA memory, and the snapshots kept for a rewind", "object"),
    _op("timings", "the paused step's phase times; step time and data wait of the last 100 steps", "object"),
    _op("history", "the last steps' loss, grad norm, LR, data wait, step time, memory", "list of objects",
        Arg("last", Int(1, HISTORY_LIMIT), 200), method="get_history"),
    _op("source", "the source around the selected frame's line", "object or null",
        Arg("context", Int(0, SOURCE_CONTEXT_LIMIT), 5)),
    _op("locals", "the selected frame's locals, yours first; all: dunders, modules, functions too",
        "list of objects", Arg("all", Flag(), False, param="everything"), method="frame_locals"),
    _op("frames", "the user's frames at the pause, outermost first; move selects one out (u) or in (d)",
        "list of objects", Arg("move", Int(-10_000, 10_000), 0)),
    _op("stacks", "every thread's stack, the training thread first", "list of objects"),
    _op("replay", "replay the step under anomaly detection; the producer of the first non-finite value",
        "object"),
    _op("diff", "run the step twice from the same state: the first module, op and line that differ, and "
        "the randomness that moved", "object", method="diff_step"),
    _op("diff_compile", "the step's forward eagerly and under torch.compile: the first module whose output differs",
        "object", Arg("backend", Choice(("inductor", "aot_eager", "eager")), "inductor"), timeout=1800),
    _op("replicas", "a page of this rank's parameters, then gradients, as fingerprints in parameter order "
        "(at most limit of them, about 16M values read; what `diff ranks` compares across ranks); whether they are "
        "sharded", "object",
        Arg("start", Int(0, 2**31), 0), Arg("limit", Int(1, REPLICAS_PAGE), 1024), method="replica_fingerprints"),
    _op("save", "write the step's evidence bundle (stepdbg-stepN/) for `stepdbg replay PATH`; its path", "object"),
    _op("eval", "run Python in the paused frame; its output, value or error", "object",
        Arg("source", Text(EVAL_SOURCE_LIMIT)), method="evaluate"),
    _op("complete", "the attributes of a dotted name of the paused frame that begin with prefix (name \"\": "
        "the frame's own names), read without running your code (no property, no __getattr__)", "list of str",
        Arg("name", Text(500)), Arg("prefix", Text(200), ""), method="attribute_names"),
    _op("interrupt", "stop the code being evaluated (Ctrl-C for eval; the job stays paused)", "object",
        timeout=10),
    _op("interrupt_job", "Ctrl-C for the job (SIGINT): its own Ctrl-C handling runs", "object", broadcast=True),
    # changes
    _op("set_lr", "set the LR of one param group or all; pin keeps it set against the scheduler", "object",
        Arg("lr", LR), Arg("group", Maybe(GROUP), None), Arg("pin", Flag(), False), broadcast=True),
    _op("set_param_group", "set another hyperparameter (weight_decay, momentum, ...) of a param group", "object",
        Arg("key", Text(64)), Arg("value", Num(0.0, HYPERPARAM_LIMIT)), Arg("group", Maybe(GROUP), None), broadcast=True),
    _op("skip", "do not apply this step's update", "object", method="skip_step", broadcast=True),
    _op("rewind", "go back to a snapshot (the newest before this step, or step's) and continue", "object",
        Arg("step", Maybe(STEP), None), resumes=True),
    _op("snapshots", "the snapshots kept (--keep-every): step, bytes", "list of objects"),
)}

SCHEMAS: dict[str, dict[str, Spec]] = {op.name: {a.name: a.spec for a in op.args} for op in OPS.values()}


class OpCalls:
    """The ops as methods over ``self.call(op, timeout, **args)``; a sync caller returns
    results, an async one coroutines. Generated from OPS below."""

    def call(self, op: str, timeout: float | None = 300, **args: Any) -> Any:
        raise NotImplementedError

    def _forget_pause(self) -> Any:
        """A resuming op is on its way: forget the pause this caller knew (and return it)."""
        return None

    def _pause_stands(self, kept: Any, error: BaseException) -> None:
        """The resuming op failed with `error`: where the job refused it, the pause `kept`
        stands (a refused `n` at an uncaught exception had the console say 'detached; the
        job goes on' of a job still paused)."""

    @property
    def history(self) -> Any:
        """The last 200 steps (the console's `info history`)."""
        return self.get_history()  # type: ignore[attr-defined]


def _method(op: Op) -> Any:
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(a.param or a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=a.default)
               for a in op.args]
    sig = inspect.Signature(params)
    wire = {a.param or a.name: a.name for a in op.args}

    def call_op(self: OpCalls, *args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        wired = {wire[k]: v for k, v in bound.arguments.items() if k != "self"}
        if not op.resumes:
            return self.call(op.name, op.timeout, **wired)
        kept = self._forget_pause()
        try:
            answer = self.call(op.name, op.timeout, **wired)
        except Exception as e:
            self._pause_stands(kept, e)
            raise
        return _standing(self, answer, kept) if inspect.isawaitable(answer) else answer

    call_op.__name__ = call_op.__qualname__ = op.method or op.name
    call_op.__doc__ = f"{op.doc}. Returns {op.returns}. (op {op.name!r})"
    call_op.__signature__ = sig  # type: ignore[attr-defined]
    return call_op


async def _standing(caller: OpCalls, answer: Any, kept: Any) -> Any:
    """An async caller's resuming op: the pause stands where the job refused it."""
    try:
        return await answer
    except Exception as e:
        caller._pause_stands(kept, e)
        raise


for _o in OPS.values():
    setattr(OpCalls, _o.method or _o.name, _method(_o))


def check_lr(value: Any) -> float:
    """The one check of a learning rate, whoever sets it: the agent (in process or over the
    wire, where set_lr's schema is the same LR), the LR dialog, the REPL line, the console.
    SchemaError (a ValueError) says what is allowed."""
    return LR.check("learning rate", value)


def lr_typed(text: str) -> float:
    """A learning rate as a person typed it ('3e-4'), checked by check_lr."""
    try:
        value = float(text)
    except ValueError:
        raise SchemaError(f"{text!r} is not a learning rate (a number from 0 to {LR_LIMIT:g})") from None
    return check_lr(value)


def markdown_table() -> str:
    """docs/protocol.md's op table."""
    rows = ["| op | arguments | returns | what it does |", "| --- | --- | --- | --- |"]
    for op in OPS.values():
        args = ", ".join(a.name if a.default is REQUIRED else f"{a.name}={a.default!r}" for a in op.args)
        rows.append(f"| `{op.name}` | {args or '—'} | {op.returns} | {op.doc} |")
    return "\n".join(rows)
