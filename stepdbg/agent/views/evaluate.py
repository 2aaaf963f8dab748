"""Code a person runs in the paused frame: tensor summaries, slices, expressions and
statements. Everything runs on the paused training thread (grad mode, autocast and the
current device are per thread) through ``Controls.on_training_thread``."""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
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
    def _interruptible(self) -> Iterator[None]:
        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, self._on_sigint) if main else None
        limit = self.time_limit
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
        """Summary of the tensor named by `name` (any expression in the paused frame)."""
        return self.controls.on_training_thread(lambda: tensors.summarize(self._eval_expr(name), name))

    def slice(self, name: str, index: str = "", limit: int = 256) -> list[Any]:
        """Values of a tensor at a numpy-style index ('0, :8'), at most `limit` of them."""
        def run() -> list[Any]:
            value = self._eval_expr(name)
            if not isinstance(value, torch.Tensor):
                raise Unevaluable(f"{name} is a {type(value).__name__}, not a tensor")
            return tensors.slice_of(value, index, limit)

        return self.controls.on_training_thread(run)

    def _eval_expr(self, expr: str) -> Any:
        ns = self.namespace()
        try:
            with self._interruptible():
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
            result: Any = None
            error = None
            busy, self.model.busy = self.model.busy, True
            try:
                with _stdout_of_this_thread(buf), self._interruptible(), _exit_ends(self.end):
                    try:
                        code = compile(source, "<stepdbg>", "eval")
                        result = eval(code, g, loc)
                    except SyntaxError:
                        exec(compile(source, "<stepdbg>", "exec"), g, loc)
            except BaseException as e:  # noqa: B036 - user code: SystemExit, Ctrl-C and the time limit too
                error = _user_traceback(e)
            finally:
                self.model.busy = busy
            if f is not None:
                refused = _write_back(f, before, loc)
                if refused:
                    error = f"{error}{refused}" if error else refused
            return {"output": buf.getvalue(), "value": None if result is None else tensors.short_repr(result, 2000),
                    "error": error}

        return self.controls.on_training_thread(run)


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


class _Router:
    """sys.stdout while code runs at a pause: the writes of the thread running it go to its
    answer, every other thread's where they always went (a process-wide redirect took the
    job's own prints from its output and log).

    One for the process, never freed, and so is every stream it ever stood for: CPython's
    print() holds a borrowed reference to sys.stdout, and an object swapped out while
    another thread prints must stay alive (a router made and freed for each eval crashed a
    job whose thread printed: SIGSEGV). Where an eval closed sys.stdout or set it to None,
    the router stays in sys.stdout standing for that: the job's writes fail (or print
    nothing) as they would plain, and stepdbg's own flush at the job's end never raises."""

    def __init__(self) -> None:
        self.target: Any = None  # where the other threads' writes go: what sys.stdout was
        self.kept: list[Any] = []  # every target it ever had, alive for good
        self._buffers: dict[int, io.StringIO] = {}  # thread id -> the answer of the eval it runs

    def stand_for(self, stream: Any) -> None:
        if not any(s is stream for s in self.kept):
            self.kept.append(stream)
        self.target = stream

    def capture(self, buf: io.StringIO | None) -> io.StringIO | None:
        """This thread's writes go to `buf` from now on (None: where the others' go); the buffer before."""
        tid = threading.get_ident()
        before = self._buffers.pop(tid, None)
        if buf is not None:
            self._buffers[tid] = buf
        return before

    def forget_threads(self) -> None:  # in a child forked during an eval: its prints are its own
        self._buffers.clear()

    def write(self, text: str) -> int:
        buf = self._buffers.get(threading.get_ident())
        if buf is not None:
            return buf.write(text)
        target = self.target
        if target is None:  # print() with sys.stdout None prints nothing
            return len(text)
        return target.write(text)

    def flush(self) -> None:
        target = self.target
        if threading.get_ident() in self._buffers or target is None:
            return
        try:
            target.flush()
        except Exception:
            if not _called_by_stepdbg():  # the job's own flush fails as it would plain
                raise

    @property
    def closed(self) -> bool:  # at exit, Python flushes sys.stdout unless it says it is closed
        return not _usable(self.target)

    def __getattr__(self, name: str) -> Any:  # encoding, fileno, isatty...: the real stream's
        return getattr(self.target, name)


_ROUTER = _Router()  # module-level: never freed
os.register_at_fork(after_in_child=_ROUTER.forget_threads)
_STEPDBG_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _usable(stream: Any) -> bool:
    """Not None and not closed (a stream that will not say counts as open, as Python counts it at exit)."""
    if stream is None:
        return False
    try:
        return not stream.closed
    except Exception:
        return True


def _called_by_stepdbg() -> bool:
    """Whether _Router.flush's caller is stepdbg's own code (or the interpreter at exit)."""
    try:
        caller = sys._getframe(2)
    except ValueError:
        return True
    return os.path.abspath(caller.f_code.co_filename).startswith(_STEPDBG_DIR)


@contextlib.contextmanager
def _stdout_of_this_thread(buf: io.StringIO) -> Iterator[None]:
    """While code runs at a pause, this thread's stdout goes to `buf`. After it, sys.stdout
    is what it was, or what the code set it to; the router stays (standing for it) only
    where that is closed or None."""
    saved = sys.stdout
    if saved is not _ROUTER:
        _ROUTER.stand_for(saved)
        sys.stdout = _ROUTER
    before = _ROUTER.capture(buf)
    try:
        yield
    finally:
        _ROUTER.capture(before)
        now = sys.stdout
        if now is _ROUTER:
            if saved is not _ROUTER and _usable(saved):
                sys.stdout = saved
        elif not _usable(now):
            _ROUTER.stand_for(now)
            sys.stdout = _ROUTER


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
