"""Code a person runs in the paused frame: tensor summaries, slices, expressions and
statements. Everything runs on the paused training thread (grad mode, autocast and the
current device are per thread) through ``Controls.on_training_thread``."""

from __future__ import annotations

import ast
import contextlib
import ctypes
import io
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import torch

from stepdbg.agent.breaks.controls import Controls
from stepdbg.agent.measure import tensors
from stepdbg.agent.step.step_model import StepModel
from stepdbg.agent.views.eval_stdout import stdout_of_this_thread
from stepdbg.wire import settings
from stepdbg.wire.protocol import ProtocolError


class Unevaluable(ProtocolError, LookupError):
    """A name the paused frame cannot evaluate, in words: the caller's argument (`bad_args`
    on the wire, its words alone: the TUI showed `LookupError: cannot evaluate 'foo(':
    SyntaxError: ...`); in process a LookupError whose text is those words."""

    def __init__(self, words: str) -> None:
        super().__init__("bad_args", words)

    def __str__(self) -> str:
        return self.message


def unevaluable_words(expr: str, e: BaseException) -> str:
    """Why `expr` has no value here, as a person says it: `not an expression ('(' was never
    closed)`, `no variable nosuch in this frame`; what else the user's code raised, by its message."""
    if isinstance(e, SyntaxError):
        return f"not an expression ({e.msg})" if e.msg else "not an expression"
    if isinstance(e, NameError) and getattr(e, "name", None):
        return f"no variable {e.name} in this frame"
    if isinstance(e, AttributeError) and getattr(e, "name", None) and getattr(e, "obj", None) is not None:
        return f"a {type(e.obj).__name__} has no attribute {e.name}"
    if isinstance(e, KeyboardInterrupt):
        return f"stopped: {e}" if str(e) else "stopped"
    return f"evaluating it failed: {e}" if str(e) else f"evaluating it failed ({type(e).__name__})"


def slice_of(t: torch.Tensor, name: str, index: str, limit: int) -> list[Any]:
    """The values of `t` at `index`; an index that does not fit is said with the ranges each
    dimension takes (the TUI showed torch's `index 99 is out of bounds for dimension 0`)."""
    try:
        return tensors.slice_of(t, index, limit)
    except tensors.BadIndex as e:
        if "does not fit shape" not in str(e):  # ('zz' is not an index: said in its own words)
            raise
        shape = list(tensors.local_shard(t)[0].shape)
        takes = "; ".join(f"dimension {d} takes 0 to {n - 1}" if n else f"dimension {d} is empty"
                          for d, n in enumerate(shape)) or "a 0-d tensor takes no index (leave the slice empty)"
        raise Unevaluable(f"the slice {index!r} does not fit {name}, of shape {shape}: {takes} "
                          "(a slice as 0, :8)") from None


MODEL_NAME = re.compile(r"(model\.)?\w+(\.\w+)*")  # a name as the Model and Memory panels show it


def _model_part(root: Any, name: str) -> Any:
    """A parameter, buffer or module of the model by the dotted name the Model panel shows
    (`head.0.weight`, `features`, `model.head.0.weight`), else None."""
    if not isinstance(root, torch.nn.Module) or not MODEL_NAME.fullmatch(name):
        return None
    path = name.removeprefix("model.")
    for named in (root.named_parameters, root.named_buffers, root.named_modules):
        found = dict(named()).get(path)  # (a few hundred names: read once per question)
        if found is not None:
            return found
    return None


def _missing_part(root: Any, name: str) -> str | None:
    """Where a model's dotted name stops, in words: `model.head.0 has no attribute weightn`
    (a typo in its last part said `not an expression ..., nor the name of a row`), else None."""
    if not isinstance(root, torch.nn.Module) or not MODEL_NAME.fullmatch(name):
        return None
    parts = name.split(".")
    for n in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:n])
        if prefix == "model" or _model_part(root, prefix) is not None:
            return f"{prefix} has no attribute {parts[n]}"
    return None


class NoTensor(str):
    """Why a name of the model has no tensor to show (a module without parameters)."""


def _default_limit() -> float | None:
    return settings.seconds_or_default("STEPDBG_EVAL_TIMEOUT")


class Evaluator:
    """Names, summaries and evaluation in the paused user frame.

    User code can loop or sleep: ``interrupt()`` (the `interrupt` op: Ctrl-C in a front
    end) raises KeyboardInterrupt in it, and so does the time limit (``time_limit``
    seconds, STEPDBG_EVAL_TIMEOUT, default 60; 0 for none). The answer is then an error
    and the job stays paused. On the main thread a SIGINT handler of ours stands in for
    the script's own while the code runs, so a blocking sleep is cut short too; on another
    thread the exception arrives at the next bytecode.
    """

    def __init__(self, model: StepModel, controls: Controls, frame: Callable[[], FrameType | None],
                 end: Callable[[int, str], None] | None = None) -> None:
        self.model = model
        self.controls = controls
        self.frame = frame  # the paused user frame, or None
        self.end = end  # the session's stop(exit_code, why): os._exit in evaluated code ends it first
        self.time_limit = _default_limit()
        self._lock = threading.Lock()
        self._running: int | None = None  # the thread running user code now
        self._sent = False  # an interrupt was sent to the code running now
        self._why = ""

    def interrupt(self, why: str = "interrupted from the front end") -> bool:
        """Stop the user code running now, if any; True when there was some."""
        with self._lock:
            tid = self._running
            if tid is None:
                return False
            if self._sent:  # one Ctrl-C an evaluation: a second (the time limit's and a client's) could
                return True  # land after the first was handled, outside the evaluation, and end the pause
            self._why, self._sent = why, True
            if tid == threading.main_thread().ident:
                signal.pthread_kill(tid, signal.SIGINT)
            else:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(KeyboardInterrupt))
            return True

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self._running is not None:  # a late signal after the code ended is dropped
            raise KeyboardInterrupt(self._why)

    @contextlib.contextmanager
    def interruptible(self, limit: float | None = None) -> Iterator[None]:
        """User code runs inside: `interrupt()` stops it, and so does the time limit (`limit`
        seconds, else the evaluator's)."""
        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, self._on_sigint) if main else None
        limit = limit or self.time_limit
        timer = threading.Timer(limit, self.interrupt, kwargs={"why": f"stopped at the {limit:g} s time limit "
                                                                      "(STEPDBG_EVAL_TIMEOUT)"}) if limit else None
        with self._lock:
            self._running, self._sent = threading.get_ident(), False
        if timer is not None:
            timer.daemon = True
            timer.name = "stepdbg-eval-timer"
            timer.start()
        try:
            yield
        finally:
            try:
                with self._lock:
                    self._running = None
                if timer is not None:
                    timer.cancel()
            finally:
                if main:
                    signal.signal(signal.SIGINT, old)

    def namespace(self) -> dict[str, Any]:
        """Names a user can inspect: the paused frame's globals and locals, and the step's
        objects (model, batch, loss, output, optimizer) where the frame has no such name:
        a script's own `batch` or `model` is what its author means by it."""
        ns: dict[str, Any] = {}
        f = self.frame()
        if f is not None:
            ns.update(f.f_globals)
            ns.update(f.f_locals)
        cap = self.model.capture
        step = {"model": self.model.root, "batch": lambda: cap.get("batch"), "loss": lambda: cap.get("loss"),
                "output": self.model.output, "optimizer": lambda: next(iter(self.model.optimizers), None)}
        for name, value in step.items():
            if name not in ns:
                ns[name] = value()
        return ns

    def summary(self, name: str) -> dict[str, Any]:
        """Summary of the tensor named by `name` (any expression in the paused frame, or a
        name the Model panel shows)."""
        def run() -> dict[str, Any]:
            value, shown = self._tensor_of(name)
            if isinstance(value, NoTensor):  # (said in the summary's place, not as an error)
                return {"name": name, "type": None, "words": str(value)}
            if value is None:  # (`p x.grad` said `NoneType None`): why there is nothing, in words
                return {**tensors.summarize(value, shown), "words": self._none_words(name)}
            return tensors.summarize(value, shown)

        return self.controls.on_training_thread(run)

    def slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        """Values of a tensor at a numpy-style index ('0, :8'), at most `limit` of them."""
        def run() -> list[Any]:
            value, shown = self._tensor_of(name)
            if isinstance(value, NoTensor):
                raise Unevaluable(str(value))
            if not isinstance(value, torch.Tensor):
                kind = type(value).__name__
                raise Unevaluable(f"{name} is {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}, not a tensor")
            return slice_of(value, shown, index, limit)

        return self.controls.on_training_thread(run)

    def _tensor_of(self, name: str) -> tuple[Any, str]:
        """The value of `name` and the name to show it by. A name Python cannot evaluate here
        that names a part of the model as the Model panel shows it (`head.0.weight`,
        `model.head.0.weight`, a module's `features`) is that part; a module, named so or by
        Python (`model`, `model.head`), is its first parameter (as Enter on its row opens it)."""
        try:
            part = self._eval_expr(name)
        except Unevaluable as e:
            part = _model_part(self.model.root(), name)
            base = _model_part(self.model.root(), name.removesuffix(".grad")) if name.endswith(".grad") else None
            if part is None and isinstance(base, torch.Tensor):  # (the Model panel's `model.0.weight.grad`:
                return base.grad, name  # it said `model.0.weight has no attribute grad` of a grad that is None)
            if part is None:
                missing = str(e).startswith("not an expression") and _missing_part(self.model.root(), name)
                raise (Unevaluable(missing) if missing else e) from None
        if isinstance(part, torch.nn.Module):  # (`model.head`, Python's, as `model.head.0`: the Model panel's)
            first = next(iter(part.named_parameters()), None)
            if first is None:
                return NoTensor(f"{name} is a module ({type(part).__name__}) with no parameters: no tensor to show"), name
            return first[1], f"{name}.{first[0]} ({name}'s first parameter)"
        return part, name

    def _none_words(self, name: str) -> str:
        """Why `name` is None, where a gradient says why: `x.grad` of a tensor that does not
        require grad, of one whose gradient is not kept, or not computed yet."""
        base = name.removesuffix(".grad")
        try:
            t = self._eval_expr(base) if base != name else None
        except Unevaluable:
            t = _model_part(self.model.root(), base)
        if not isinstance(t, torch.Tensor):
            return f"{name} is None here: no tensor to show yet"  # (the loss before the forward)
        if not t.requires_grad:
            return f"{name} is None: {base} does not require grad (no gradient is computed for it)"
        if not t.is_leaf:
            return (f"{name} is None: {base} is not a leaf tensor, so its gradient is not kept "
                    f"({base}.retain_grad() before the backward keeps it)")
        return (f"{name} is None: no gradient yet (no backward has reached {base} since its gradient "
                "was last set to None, as zero_grad does)")

    def _eval_expr(self, expr: str) -> Any:
        ns = self.namespace()
        try:
            with self.interruptible():
                return eval(compile(expr, "<stepdbg>", "eval"), ns, ns)
        except BaseException as e:  # noqa: B036 - user code: SystemExit and Ctrl-C become an answer too
            raise Unevaluable(unevaluable_words(expr, e)) from None

    def evaluate(self, source: str) -> dict[str, Any]:
        """Run an expression or statement in the paused frame; stdout and errors come back as text.

        Only what the code assigns or deletes changes in the frame: the names whose value
        is not, after the code, the very object it was before (a script's top level is its
        globals dict; a function's, the f_locals Python offers)."""
        def run() -> dict[str, Any]:
            f = self.frame()
            g = f.f_globals if f is not None else {}
            loc = self.namespace()
            before = dict(loc)  # holds every value, so `is` below compares the objects themselves
            buf = io.StringIO()
            value: str | None = None
            error = None
            ran = False
            busy, self.model.busy = self.model.busy, True
            try:
                # The value's repr is user code too: timed, interruptible and printing into the answer
                # as the line (a repr that slept held the training thread past any limit, and a
                # KeyboardInterrupt raised in one ended the pause and the job).
                with stdout_of_this_thread(buf), self.interruptible(), _exit_ends(self.end):
                    result = _run(source, g, loc)
                    ran = True
                    value = None if result is None else tensors.short_repr(result, 2000)
            except BaseException as e:  # noqa: B036 - user code: SystemExit, Ctrl-C and the time limit too
                # Our Ctrl-C (a front end's, the time limit's) in words: its traceback ran through our
                # own SIGINT handler (the TUI showed a KeyboardInterrupt in views/evaluate.py).
                what = "the line ran; showing its value" if ran else "the line"
                error = (f"{self._why}: {what} did not finish{_still(self.controls)}"
                         if isinstance(e, KeyboardInterrupt) and self._sent else _user_traceback(e))
                if self.controls.held_signal(e):  # (its SIGTERM's sys.exit: the job ends, as without stepdbg)
                    error += "the job's own signal handler raised it as the line ran: the job ends with it\n"
            finally:
                self.model.busy = busy
            if f is not None:
                refused = _write_back(f, before, loc)
                if refused:
                    error = f"{error}{refused}" if error else refused
            return {"output": buf.getvalue(), "value": value, "error": error}

        return self.controls.on_training_thread(run)


def _still(controls: Controls) -> str:
    """What an interrupted line leaves: the pause, unless the job is ending (q, end)."""
    return "" if controls.end_requested else "; the job is still paused, unharmed"


def _run(source: str, g: dict[str, Any], loc: dict[str, Any]) -> Any:
    """`source` run in `g` and `loc`: an expression's value; statements', the value of the last
    where it is an expression (`import os; os.getpid()` said nothing: pdb and IPython echo it)."""
    try:
        code = compile(source, "<stepdbg>", "eval")
    except SyntaxError:
        tree = ast.parse(source, "<stepdbg>", "exec")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, "<stepdbg>", "exec"), g, loc)
        return None if last is None else eval(compile(ast.Expression(last.value), "<stepdbg>", "eval"), g, loc)
    return eval(code, g, loc)


_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, its locals in fast slots
_SNAPSHOT = sys.version_info < (3, 13)  # before PEP 667, a function's f_locals is a copy of its fast locals
_FAST_DELETE = sys.version_info < (3, 12)  # 3.12 sets a local cleared through f_locals to None instead


def _write_back(f: FrameType, before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """Into the paused frame, what the code assigned (a name new, or bound to another
    object) and deleted; nothing else. Read once: in a function's frame (Python < 3.13)
    each read of f_locals copies the fast locals over it again, and what is written into
    that copy reaches the function only through PyFrame_LocalsToFast. The function's
    locals that could not be deleted are said in one line; None where all went."""
    try:
        frame_ns = f.f_locals
    except Exception:
        return None
    code = f.f_code
    fast = (set(code.co_varnames) | set(code.co_cellvars) | set(code.co_freevars)
            if code.co_flags & _CO_OPTIMIZED else set())
    for k, v in after.items():
        if k not in before or before[k] is not v:
            with contextlib.suppress(Exception):
                frame_ns[k] = v
    kept = []
    for k in sorted(before.keys() - after.keys()):
        if k not in frame_ns:
            continue
        if k in fast and not _FAST_DELETE and _SNAPSHOT:
            kept.append(k)
            continue
        try:
            del frame_ns[k]
        except Exception:
            kept.append(k)
    if fast and _SNAPSHOT:
        ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(f), ctypes.c_int(1 if _FAST_DELETE else 0))
    if not kept:
        return None
    names = ", ".join(kept)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return (f"not deleted: {names}: in Python {version} a local variable of {code.co_name}() cannot be deleted "
            f"from a pause; it is unchanged (assign it instead, as {kept[0]} = None)")


@contextlib.contextmanager
def _exit_ends(end: Callable[[int, str], None] | None) -> Iterator[None]:
    """While code runs at a pause, os._exit(N) (which skips atexit) ends the session first:
    its end record is written and its session files removed, then the process exits with N."""
    real = os._exit
    if end is None:
        yield
        return

    def _exit(code: int) -> None:
        with contextlib.suppress(BaseException):
            end(code, "os._exit() in code run at a pause")
        real(code)

    os._exit = _exit  # type: ignore[assignment]
    try:
        yield
    finally:
        if os._exit is _exit:
            os._exit = real


def _user_traceback(e: BaseException) -> str:
    """The traceback of an evaluated statement, from its own code on (not stepdbg's)."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<stepdbg>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb, chain=False))
