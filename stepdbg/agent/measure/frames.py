"""Frames: which code is the user's, where a break is, what the root call's kwargs were."""

from __future__ import annotations

import ast
import contextvars
import dis
import functools
import os
import runpy
import sys
import traceback
import weakref
from collections.abc import Callable, Iterable
from types import CodeType, FrameType
from typing import Any, TypeVar

import torch

from stepdbg.agent.measure import source_lines

# stepdbg's own code, wherever a module of it lives: asked of the top package (always loaded
# before this module), not of this file's place, whose move once made stepdbg's launcher count
# as the user's code.
OWN_DIR = os.path.dirname(os.path.abspath(sys.modules[__name__.partition(".")[0]].__file__ or "")) + os.sep
# The runner between the interpreter and the script: runpy, frozen or not.
_RUNNER = ("<frozen runpy>", os.path.abspath(runpy.__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__))
_NOT_USER = (OWN_DIR, _TORCH_DIR, "<frozen")
# Trainers whose frames are not the user's: a break is placed in the user's code, with the
# framework's frame beside it. Found without importing them.
FRAMEWORKS = ("lightning", "pytorch_lightning", "lightning_fabric", "transformers", "accelerate")


@functools.lru_cache(maxsize=1)
def _framework_dirs() -> tuple[str, ...]:
    import importlib.util

    dirs = []
    for name in FRAMEWORKS:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for loc in (spec.submodule_search_locations or []) if spec else []:
            dirs.append(os.path.abspath(loc) + os.sep)
    return tuple(dirs)


@functools.lru_cache(maxsize=4096)  # asked for every frame of every op in a replay
def is_framework_file(path: str) -> bool:
    return os.path.abspath(path).startswith(_framework_dirs()) if _framework_dirs() else False


@functools.lru_cache(maxsize=4096)
def is_user_file(path: str) -> bool:
    """False for torch's, stepdbg's, the trainer frameworks' and the standard library's files."""
    if path.startswith(_NOT_USER) or path.startswith("<"):
        return False
    path = os.path.abspath(path)
    if path.startswith(_STDLIB_DIR) and "site-packages" not in path:
        return False
    return not is_framework_file(path)


def is_own_file(path: str) -> bool:
    """stepdbg's files and the runner that starts the script: frames a person never wrote
    and that plain Python would not show (pdb hides its own the same way)."""
    return path.startswith(_RUNNER) or os.path.abspath(path).startswith(OWN_DIR)


T = TypeVar("T")


def without_own(frames: Iterable[T], filename: Callable[[T], str]) -> list[T]:
    """`frames` (outermost first) as a person's view shows them: the person's own frames and
    the libraries' they called, stepdbg's left out with no line that says so (a Ctrl-C's
    traceback, the Threads view: a line about stepdbg there read as stepdbg's doing). The
    launcher and runpy at the outer end go, as Python drops its own; past the user's last
    frame, what stepdbg called is its own too (an interrupt at a pause lands in queue.py
    and threading.py under stepdbg's wait)."""
    frames = list(frames)
    last_user = max((i for i, f in enumerate(frames) if is_user_file(filename(f))), default=-1)
    inner = next((i for i in range(last_user + 1, len(frames)) if is_own_file(filename(frames[i]))), len(frames))
    kept = [f for f in frames[:inner] if not is_own_file(filename(f))]
    # Unless stepdbg's wrapper called on the person's behalf what they called (torch's
    # clip_grad_norm_, raising): from the first library frame on, plain Python's frames.
    lib = next((i for i in range(inner, len(frames)) if _library(filename(frames[i]))), None)
    return kept + ([f for f in frames[lib:] if not is_own_file(filename(f))] if lib is not None else [])


def _library(path: str) -> bool:
    """A file of an installed library (torch's): not stepdbg's, not the standard library's."""
    if path.startswith("<") or is_own_file(path):
        return False
    path = os.path.abspath(path)
    return not path.startswith(_STDLIB_DIR) or "site-packages" in path


def exception_text(exc: BaseException) -> str:
    """str(exc), for any exception object: one whose __str__ raises is named by its type
    (as Python's own traceback does), so a post-mortem never fails on the user's error."""
    try:
        return str(exc)
    except Exception:
        return f"<exception str() failed: {type(exc).__name__}>"


def user_traceback(exc: BaseException) -> str:
    """`exc`'s traceback as plain Python prints it for the script, in the exception and
    everything chained to it: the person's own frames only. stepdbg's frames, and the
    standard library's that stepdbg's waiting put under them, are left out without a line
    that says so (a Ctrl-C at a pause, or one that lands in stepdbg's hooks inside the
    script's model call, is the script's Ctrl-C; a line about stepdbg there read as stepdbg
    failing)."""
    te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    todo, seen = [te], set()
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        t.stack = traceback.StackSummary.from_list(without_own(t.stack, lambda fs: fs.filename))
        todo += [c for c in (t.__cause__, t.__context__, *(getattr(t, "exceptions", None) or ())) if c]
    return "".join(te.format())


def _innermost(start: FrameType | None, belongs: Callable[[str], bool]) -> FrameType | None:
    f = start
    while f is not None:
        if belongs(f.f_code.co_filename):
            return f
        f = f.f_back
    return None


def framework_frame(start: FrameType | None) -> FrameType | None:
    """The innermost frame of a trainer framework (Lightning, transformers, accelerate)."""
    return _innermost(start, is_framework_file)


def user_frame(start: FrameType | None) -> FrameType | None:
    """The innermost frame that belongs to the user's code (not torch, not stepdbg)."""
    return _innermost(start, is_user_file)


def variable_holding(obj: Any, frame: FrameType | None) -> str | None:
    """The name of `frame`'s variable whose value is `obj` itself (locals first)."""
    if frame is None:
        return None
    for scope in (frame.f_locals, frame.f_globals):
        for name, value in list(scope.items())[:10_000]:
            if value is obj and not name.startswith("_"):
                return name
    return None


def held_as(obj: Any, start: FrameType | None) -> str | None:
    """The name of the innermost user frame's variable (from `start` out) that holds `obj`."""
    f = start
    while f is not None:
        name = variable_holding(obj, f) if is_user_file(f.f_code.co_filename) else None
        if name is not None:
            return name
        f = f.f_back
    return None


def where_of(frame: FrameType | None, lineno: int | None = None) -> dict[str, Any] | None:
    """File, line, function and code of a frame, as a break reports them."""
    return None if frame is None else _where(frame.f_code, lineno or frame.f_lineno)


def site_where(site: tuple[Any, ...]) -> dict[str, Any]:
    """File, line, function and code of a call site (file, line, function[, code]): a
    bundle's carries its code, so that a replay elsewhere reads no file the bundle names."""
    file, line, function, *code = site
    return {"file": os.path.abspath(file), "line": line, "function": function,
            "code": code[0] if code else source_lines.line(file, line).strip()}


def only_argument(code: str) -> str | None:
    """The one argument of the call on a line of code, as written (`out = model(x)`: `x`);
    None for no call, or a call of several arguments. How a bundle's replay, which has no
    frame to read the variable from, names the batch as the script did."""
    try:
        tree = ast.parse(code.strip())
    except (SyntaxError, ValueError):
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    if len(calls) != 1 or len(calls[0].args) != 1 or calls[0].keywords or isinstance(calls[0].args[0], ast.Starred):
        return None
    return ast.unparse(calls[0].args[0])[:200]


def _where(code: CodeType, line: int) -> dict[str, Any]:
    return {"file": os.path.abspath(code.co_filename), "line": line, "function": code.co_name,
            "code": source_lines.line(code.co_filename, line).strip()}


def caller_kwargs() -> dict[str, Any]:
    """The kwargs of the root module call being entered.

    Global forward pre-hooks get args only; the kwargs live in the frame of
    Module._call_impl (torch 2.x), a few frames up from the hook."""
    try:
        f: FrameType | None = sys._getframe(3)
    except ValueError:
        return {}
    for _ in range(6):
        if f is None:
            break
        if f.f_code.co_name in ("_call_impl", "inner") and "kwargs" in f.f_locals:
            kw = f.f_locals["kwargs"]
            return dict(kw) if isinstance(kw, dict) else {}
        f = f.f_back
    return {}


def _called_by_framework(start: FrameType) -> bool:
    """The innermost frame outside torch, stepdbg and the standard library is a trainer's:
    the framework, not the user's code, called what runs (Lightning's closure, its backward)."""
    f: FrameType | None = start
    while f is not None:
        path = f.f_code.co_filename
        if is_framework_file(path) or is_user_file(path):
            return is_framework_file(path)
        f = f.f_back
    return False


def _runs(code: CodeType, start: FrameType | None) -> FrameType | None:
    """The frame on the stack from `start` out that runs `code`, if one does."""
    while start is not None and start.f_code is not code:
        start = start.f_back
    return start


class ModelCaller:
    """The user's frame that called the model this step. A trainer calls the user's function
    (Lightning's training_step), which makes the loss and returns; the trainer's own code then
    calls backward and steps the optimizer. A break there is placed where that function
    returned the loss, not at the script's `trainer.fit(...)`. The frame is held only until the
    backward starts (a returned frame keeps its locals, a model's logits among them, alive);
    from there on its place is kept."""

    def __init__(self) -> None:
        self.frame: FrameType | None = None
        self.left: tuple[CodeType, int] | None = None  # the released frame's code and line (no locals)
        self.root: weakref.ReferenceType[Any] | None = None  # the model this step's forward ran

    def called(self, root: Any = None) -> tuple[str, int, str] | None:
        """A root forward begins: (file, line, function) of the user's line that called the
        model; the frame is kept while gradients are on."""
        if self.root is None or self.root() is not root:  # (a new weakref only when the model changes)
            self.root = _weak(root)
        f = user_frame(sys._getframe(1))
        self.frame, self.left = (f if torch.is_grad_enabled() else None), None
        return (f.f_code.co_filename, f.f_lineno, f.f_code.co_name) if f is not None else None

    def release(self) -> None:
        """The backward is next: the frame is let go, its code and line kept (every step: no
        walk of the stack here, a break asks whether it had returned)."""
        f, self.frame = self.frame, None
        if f is not None:
            self.left = (f.f_code, f.f_lineno)

    def place(self, start: FrameType, frame: FrameType | None = None,
              stack: PausedStack | None = None) -> tuple[PausedStack, dict[str, Any] | None]:
        """The user's frames at a break taken at `start` (or in `frame`, or on a traceback's
        `stack`), and where the break is."""
        if frame is not None or stack is not None:
            stack = stack or PausedStack.from_frame(frame)
            return stack, where_of(frame or stack.innermost())
        stack = PausedStack.from_frame(start)
        if not _called_by_framework(start):
            return stack, where_of(stack.innermost())
        f = self.frame
        if f is not None and _runs(f.f_code, start) is not f:  # (it returned the loss to the trainer)
            stack.frames.append((f, f.f_lineno))  # (selected: the innermost, as every new stack's)
            return stack, where_of(f)
        if self.left is not None and _runs(self.left[0], start) is None:
            return stack, _where(*self.left)
        inner = wrapped_step(self.root() if self.root is not None else None)
        if inner is not None:  # (the frame that called the model, trainer.fit's, is still running)
            return stack, _where(*inner)
        return stack, where_of(stack.innermost())


def _weak(obj: Any) -> weakref.ReferenceType[Any] | None:
    try:
        return weakref.ref(obj) if obj is not None else None
    except TypeError:
        return None


def wrapped_step(root: Any) -> tuple[CodeType, int] | None:
    """Lightning's DDP and FSDP strategies call the user's training_step inside the wrapper's
    forward (the model stepdbg sees is the wrapper, called by the trainer): the step
    function's code, and the line of its one `return <value>` (the def line when it has
    several), read from its bytecode; None for any other model."""
    m = root
    for _ in range(4):  # DDP -> Lightning's wrapper -> the LightningModule
        fn = getattr(type(m), "training_step", None)
        code = getattr(fn, "__code__", None)
        if isinstance(code, CodeType) and is_user_file(code.co_filename):
            return code, _value_return_line(code) or code.co_firstlineno
        m = getattr(m, "module", None) or getattr(m, "_forward_module", None) or getattr(m, "_orig_mod", None)
        if m is None:
            return None
    return None


def _value_return_line(code: CodeType) -> int | None:
    """The line of the function's one `return <value>` (a bare or implicit `return None` does
    not count), or None when it has none or several."""
    lines, prev = set(), None
    for ins in dis.get_instructions(code):
        line = ins.positions.lineno if ins.positions is not None else None
        if ins.opname == "RETURN_VALUE" and not (prev is not None and prev.opname == "LOAD_CONST"
                                                 and prev.argval is None):
            lines.add(line)
        elif ins.opname == "RETURN_CONST" and ins.argval is not None:
            lines.add(line)
        prev = ins
    return lines.pop() if len(lines) == 1 else None


# Whose frame selection a request reads and moves: each client's `u`/`d` are its own (the
# TUI's `u` moved an open `attach --repl`'s frame). The server sets its client on the threads
# that answer it; the job's own console is None.
SELECTOR: contextvars.ContextVar[object] = contextvars.ContextVar("stepdbg_selector", default=None)


class PausedStack:
    """The user's frames at a pause, outermost first, and the one selected: what pdb's
    ``w``, ``u`` and ``d`` walk. Evaluation, the source view and locals look at the selected
    frame, each client's own (SELECTOR); a pause selects the innermost. Each frame keeps the line it is paused on (for a
    traceback, the line that raised)."""

    def __init__(self, frames: list[tuple[FrameType, int]] | None = None) -> None:
        self.frames = frames or []
        self._chosen: dict[object, int] = {}  # each selector's frame, once it moved (else the innermost)

    @property
    def index(self) -> int:
        return self._chosen.get(SELECTOR.get(), len(self.frames) - 1)

    @classmethod
    def from_frame(cls, start: FrameType | None) -> PausedStack:
        frames = []
        f = start
        while f is not None:
            if is_user_file(f.f_code.co_filename):
                frames.append((f, f.f_lineno))
            f = f.f_back
        return cls(frames[::-1])

    @classmethod
    def from_traceback(cls, frames: list[tuple[FrameType, int]]) -> PausedStack:
        return cls([(f, n) for f, n in frames if is_user_file(f.f_code.co_filename)] or frames[-1:])

    def selected(self) -> FrameType | None:
        return self.frames[self.index][0] if self.frames else None

    def selected_line(self) -> int | None:
        return self.frames[self.index][1] if self.frames else None

    def innermost(self) -> FrameType | None:
        return self.frames[-1][0] if self.frames else None

    def move(self, by: int) -> None:
        """Select the frame `by` out (negative: in), as `u`/`d` do; stops at either end."""
        if not self.frames:
            raise LookupError("no paused frame: the job is not paused")
        self._chosen[SELECTOR.get()] = min(max(self.index - by, 0), len(self.frames) - 1)

    def listing(self) -> list[dict[str, Any]]:
        return [{**(where_of(f, n) or {}), "selected": i == self.index} for i, (f, n) in enumerate(self.frames)]
