"""Breakpoint conditions: one spelling for the command line, code and front ends.

This module is pure Python (no torch) so the CLI can refuse a malformed spec before
the training script starts, and a front end can validate as the user types.
"""

from __future__ import annotations

import ast
import difflib
import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PHASES = (
    "before_forward",
    "after_forward",
    "before_backward",
    "after_backward",
    "before_optimizer_step",
    "after_optimizer_step",
)

# Scalars a step exposes to conditions, and the first pause point where each is known.
SCALAR_PHASE = {
    "step": "before_forward",
    "data_wait": "before_forward",
    "lr": "before_forward",
    "step_time": "before_forward",  # of the previous step
    "loss": "before_backward",
    "loss_median": "before_backward",
    "grad_norm": "before_optimizer_step",
    "mem": "before_optimizer_step",
}

# What may happen at a break (--on-break), in the order given.
ACTIONS = ("report", "replay", "save", "skip", "rewind", "abort", "pause")

SIMPLE_KINDS = {
    "nan": "nan",
    "inf": "nan",
    "nonfinite": "nan",
    "exception": "exception",
    "activations": "activations",
    "stale_grad": "stale_grad",
}

# kind -> (operator, phase, value parser name)
THRESHOLD_KINDS = {
    "grad_norm": (">", "before_optimizer_step", "number"),
    "loss": (">", "before_backward", "number"),
    "loss_spike": (">", "before_backward", "number"),
    "data_wait": (">", "before_forward", "seconds"),
    "stall": (">", "watchdog", "seconds"),
    "mem": (">", "before_optimizer_step", "size"),
    "step": ("==", "before_forward", "count"),
    "every": ("=", "before_forward", "count"),
}

HELP = """\
conditions (--break SPEC, stepdbg.watch(SPEC), or the UI):
  nan | inf | nonfinite   a non-finite loss, gradient or parameter
  grad_norm>X             global L2 gradient norm above X (the pre-clip norm when the loop clips)
  loss>X                  loss above X
  loss_spike>K            loss above K times the running median of recent steps
  data_wait>S             waiting for data longer than S seconds (e.g. 2, 500ms)
  step==N                 at step N (0-based: N optimizer steps done)
  every=N                 every N steps
  mem>SIZE                CUDA allocated (or host RSS without CUDA) above SIZE (e.g. 8GB)
  exception               an uncaught exception (post-mortem)
  stall>S                 no progress for S seconds: record every thread's stack
  activations             the model's output is not finite: break in forward, naming the module
                          that made it from finite inputs (found by running the forward again)
  stale_grad              gradients of the previous step still there at backward (zero_grad missing)
  expr:EXPR               a boolean expression over step, loss, grad_norm, data_wait, lr,
                          mem, step_time, loss_median (e.g. 'expr:loss > 4 and step > 100')"""


class ConditionError(ValueError):
    """A malformed condition spec; the message names the spec and what is wrong."""

    def __init__(self, spec: str, problem: str) -> None:
        super().__init__(f"bad condition {spec!r}: {problem}")
        self.spec = spec
        self.problem = problem


@dataclass(frozen=True)
class Condition:
    """One parsed breakpoint condition."""

    spec: str
    kind: str
    phase: str
    threshold: float | None = None
    expr: str | None = None
    names: tuple[str, ...] = ()
    _code: Any = field(default=None, compare=False, repr=False)

    @property
    def reads(self) -> tuple[str, ...]:
        """The step scalars this condition's check reads."""
        if self.kind == "expr":
            return self.names
        return {"loss_spike": ("loss", "loss_median"), "every": ("step",)}.get(self.kind, (self.kind,))

    def check(self, scalars: Mapping[str, Any]) -> str | None:
        """Return a one-sentence reason when this condition fires on `scalars`, else None;
        an expression that raises on them raises ExpressionRaised.

        Used for the scalar kinds; nan, exception, stall, activations and stale_grad are
        decided by the session, which measures what they need.
        """
        if self.kind in _ABOVE:
            v = scalars.get(self.kind)
            return _ABOVE[self.kind](v, self.threshold) if v is not None and v > self.threshold else None
        test = _CHECKS.get(self.kind)
        return test(self, scalars) if test is not None else None


def _loss_spike(c: Condition, scalars: Mapping[str, Any]) -> str | None:
    v, med, t = scalars.get("loss"), scalars.get("loss_median"), c.threshold
    if v is not None and med is not None and med > 0 and v > t * med:
        return f"loss {_fmt(v)} is {v / med:.1f}x the running median {_fmt(med)} (limit {_fmt(t)}x)"
    return None


def _at_step(c: Condition, scalars: Mapping[str, Any]) -> str | None:
    step = scalars.get("step")
    return f"reached step {step}" if step == c.threshold else None


def _every(c: Condition, scalars: Mapping[str, Any]) -> str | None:
    step, n = scalars.get("step"), int(c.threshold)
    if step is not None and step % n == 0:  # step 0 too: every=N fires at 0, N, 2N, ...
        return f"step {step} is a multiple of {n}"
    return None


def _expr(c: Condition, scalars: Mapping[str, Any]) -> str | None:
    env = {n: scalars.get(n) for n in c.names}
    if any(v is None for v in env.values()):
        return None
    # Numbers are floats in a condition: every operation then costs the same, however
    # large its operands (an int power can hold the training thread for minutes).
    env = {n: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for n, v in env.items()}
    shown = ", ".join(f"{n}={_fmt(env[n])}" for n in c.names)
    try:
        hit = eval(c._code, {"__builtins__": {}, **_EXPR_FUNCS}, env)
    except (ArithmeticError, TypeError, ValueError) as e:  # (it did not hold: the caller says so, once)
        raise ExpressionRaised(c, f"{_raised_words(e)} with {shown}") from None
    return f"{c.expr} is true ({shown})" if hit else None


def _raised_words(e: Exception) -> str:
    """What went wrong in an expression, in words, not Python's exception (the screen showed
    `TypeError ('float' object is not subscriptable)`)."""
    if isinstance(e, ZeroDivisionError):
        return "a division by zero"
    if isinstance(e, OverflowError):
        return "a number too large to compute"
    return "a value it could not compute"


class ExpressionRaised(Exception):
    """An expr: condition's expression raised on a step's values ('expr:1/(step-31) > 0' at
    step 31: ZeroDivisionError), said in its words: which error, at which values."""

    def __init__(self, c: Condition, words: str) -> None:
        super().__init__(f"its expression raised {words}")
        self.condition = c


# The other scalar kinds: how each is tested on a step's scalars.
_CHECKS: dict[str, Callable[[Condition, Mapping[str, Any]], str | None]] = {
    "loss_spike": _loss_spike, "step": _at_step, "every": _every, "expr": _expr}


# Kinds that fire when their scalar is above the threshold, and how each says so.
_ABOVE = {
    "grad_norm": lambda v, t: f"gradient norm {_fmt(v)} is above {_fmt(t)}",
    "loss": lambda v, t: f"loss {_fmt(v)} is above {_fmt(t)}",
    "data_wait": lambda v, t: f"waited {v:.2f}s for data (limit {_fmt(t)}s)",
    "mem": lambda v, t: f"memory {format_size(v)} is above {format_size(t)}",
}


ABOVE_KINDS = frozenset(_ABOVE)  # kinds that fire when their one scalar is above the threshold


MAX_SPEC = 1000  # characters: a condition is a line, not a program
MAX_EXPONENT = 64


def parse(spec: str) -> Condition:
    """Parse one condition spec, raising ConditionError with a precise message.

    A spec is parsed once per process: the CLI's check, the agent's configuration, the
    breakpoints and the TUI's check as you type all ask here, and a Condition is frozen
    (what a breakpoint has seen is kept by Breakpoints), so the answer is kept."""
    if not isinstance(spec, str) or not spec.strip():
        raise ConditionError(str(spec), "empty condition; see 'stepdbg --help-conditions'")
    if len(spec) > MAX_SPEC:
        raise ConditionError(spec[:40] + "...", f"a condition is {len(spec)} characters long; "
                             f"at most {MAX_SPEC} are accepted")
    return _parsed(spec)


@functools.lru_cache(maxsize=1024)
def _parsed(spec: str) -> Condition:
    text = spec.strip()
    if text.startswith("expr:"):
        return _parse_expr(spec, text[5:].strip())
    low = text.lower()  # (matched in lower case; the errors quote what was typed: '12xB', not '12xb')
    if low in SIMPLE_KINDS:
        kind = SIMPLE_KINDS[low]
        phase = {"exception": "exception", "activations": "forward"}.get(kind, "any")
        return Condition(spec=spec, kind=kind, phase=phase)
    m = re.fullmatch(r"([a-z_]+)\s*(==|>=|<=|>|<|=)\s*(\S.*)", text, re.IGNORECASE)
    if not m:
        name = re.match(r"[a-z_]*", low).group(0)
        if name in THRESHOLD_KINDS:
            op = THRESHOLD_KINDS[name][0]
            raise ConditionError(spec, f"{name} needs a value, e.g. '{name}{op}{_example(name)}'")
        raise ConditionError(spec, f"unknown condition{_near(low, SIMPLE_KINDS)}; known: {', '.join(_known())}")
    typed, op, raw = m.groups()
    name = typed.lower()
    if name not in THRESHOLD_KINDS:
        raise ConditionError(spec, f"unknown condition {typed!r}{_near(name, THRESHOLD_KINDS)}; known: {', '.join(_known())}")
    want_op, phase, parser = THRESHOLD_KINDS[name]
    if op != want_op and not (want_op == ">" and op == ">="):
        raise ConditionError(spec, f"{name} takes '{want_op}', e.g. '{name}{want_op}{_example(name)}'")
    try:
        value = _VALUE_PARSERS[parser](spec, raw.strip())
    except ConditionError as e:  # `grad_norm>1000 and step>3`: more than one test, written as one
        raise (ConditionError(spec, f"{e.problem}; more than one test is an expression: 'expr:{text}'")
               if re.search(r"\s(and|or|not)\s|[<>=!]", raw, re.IGNORECASE) else e) from None
    if name == "loss_spike" and value <= 1:  # (a factor of the running median: at or below 1, no spike)
        raise ConditionError(spec, f"a spike is a factor above 1 of the running median, e.g. 'loss_spike>3' (not {raw.strip()!r})")
    return Condition(spec=spec, kind=name, phase=phase, threshold=value)


def phase_index(phase: str) -> int:
    return PHASES.index(phase)


_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def _number(spec: str, raw: str) -> float:
    try:
        v = float(raw)
    except ValueError:
        raise ConditionError(spec, f"{raw!r} is not a number") from None
    if not math.isfinite(v):
        raise ConditionError(spec, f"threshold must be finite, got {raw!r}")
    return v


def _seconds(spec: str, raw: str) -> float:
    m = re.fullmatch(r"([0-9.]+(?:e-?[0-9]+)?)\s*(ms|s|m|min)?", raw.lower())
    if not m:
        raise ConditionError(spec, f"{raw!r} is not a duration (use seconds: 2, 0.5, 500ms, 1m)")
    v = _number(spec, m.group(1)) * {"ms": 1e-3, "s": 1, None: 1, "m": 60, "min": 60}[m.group(2)]
    if v <= 0:
        raise ConditionError(spec, "duration must be positive")
    return v


def _size(spec: str, raw: str) -> float:
    m = re.fullmatch(r"([0-9.]+)\s*([a-z]*)", raw.lower())
    if not m or m.group(2) not in _SIZE_UNITS:
        raise ConditionError(spec, f"{raw!r} is not a size (e.g. 8GB, 512MiB, 1e9)")
    return _number(spec, m.group(1)) * _SIZE_UNITS[m.group(2)]


def _count(spec: str, raw: str) -> float:
    if not re.fullmatch(r"[0-9]+", raw):
        raise ConditionError(spec, f"{raw!r} is not a whole number of steps")
    v = int(raw)
    if spec.lstrip().lower().startswith("every") and v < 1:
        raise ConditionError(spec, "every needs a step count of at least 1")
    return v


_VALUE_PARSERS = {"number": _number, "seconds": _seconds, "size": _size, "count": _count}


def _example(name: str) -> str:
    return {"data_wait": "2", "stall": "60", "mem": "8GB", "step": "100", "every": "50"}.get(name, "100")


def _near(typed: str, names: Any) -> str:
    """' (did you mean grad_norm?)' for a name a letter or two off ('gradnorm', 'nann')."""
    near = difflib.get_close_matches(typed, list(names), n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def _known() -> list[str]:
    return ["nan", "inf", "nonfinite", "exception", "activations", "stale_grad"] + [
        f"{k}{v[0]}X" for k, v in THRESHOLD_KINDS.items()
    ] + ["expr:..."]


_EXPR_FUNCS = {"abs": abs, "min": min, "max": max}
_ALLOWED_NODES = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.UAdd,
    ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod, ast.Pow, ast.FloorDiv,
    ast.Compare, ast.Gt, ast.GtE, ast.Lt, ast.LtE, ast.Eq, ast.NotEq,
    ast.Name, ast.Load, ast.Constant, ast.Call,
)


def _parse_expr(spec: str, expr: str) -> Condition:  # noqa: C901 - the expression grammar's node kinds, each checked where it is parsed
    if not expr:
        raise ConditionError(spec, "expr: needs an expression, e.g. 'expr:loss > 4 and step > 100'")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        # Python gives column 0 when the expression stops short; columns count from its start.
        at = (f"column {e.offset} of the expression {expr!r}" if e.offset and e.offset <= len(expr)
              else f"the end of {expr!r}: it stops short")
        raise ConditionError(spec, f"syntax error at {at} ({e.msg})") from None
    names: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise ConditionError(spec, _not_allowed(expr, node))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            _check_exponent(spec, node.right)
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool)):
            raise ConditionError(spec, f"only numbers are allowed, not {node.value!r}")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _EXPR_FUNCS
        ):
            raise ConditionError(spec, f"only {', '.join(_EXPR_FUNCS)} may be called")
        if isinstance(node, ast.Name) and node.id not in _EXPR_FUNCS:
            if node.id not in SCALAR_PHASE:
                raise ConditionError(
                    spec, f"unknown name {node.id!r}; known: {', '.join(SCALAR_PHASE)}"
                )
            if node.id not in names:
                names.append(node.id)
    if not names:
        raise ConditionError(spec, "the expression uses no step scalar")
    phase = max((SCALAR_PHASE[n] for n in names), key=phase_index)
    code = compile(_Floats().visit(tree), f"<condition {expr}>", "eval")
    return Condition(spec=spec, kind="expr", phase=phase, expr=expr, names=tuple(names), _code=code)


def _not_allowed(expr: str, node: ast.AST) -> str:
    """Why a part of an expression is refused, quoting it as typed, and what a condition takes
    (it said `Attribute is not allowed in a condition`)."""
    part = ast.get_source_segment(expr, node) or expr
    inner = ast.get_source_segment(expr, getattr(node, "value", node)) or ""
    why = {ast.Attribute: f"each name is one number already: write {inner} alone",
           ast.Subscript: f"each name is one number already (lr is param group 0's): write {inner} alone"
           }.get(type(node), "")
    return (f"{part!r} is not allowed{': ' + why if why else ''}; a condition takes the step's numbers by name "
            f"({', '.join(SCALAR_PHASE)}), numbers, + - * / // % **, comparisons, and/or/not, abs/min/max")


def _check_exponent(spec: str, exponent: ast.expr) -> None:
    """`**` takes a number up to MAX_EXPONENT as its exponent: x**2, x**0.5, 10**-3."""
    node = exponent.operand if isinstance(exponent, ast.UnaryOp) else exponent
    value = node.value if isinstance(node, ast.Constant) else None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or abs(value) > MAX_EXPONENT:
        raise ConditionError(spec, f"** takes a number up to {MAX_EXPONENT} as its exponent, "
                             "e.g. 'expr:grad_norm**2 > 100'")


class _Floats(ast.NodeTransformer):
    """Integer constants become floats."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            return ast.copy_location(ast.Constant(float(node.value)), node)
        return node


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def format_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.3g}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1000
    return f"{n}B"
