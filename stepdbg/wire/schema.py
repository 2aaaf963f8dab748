"""The arguments each request may carry: type, range and size, declared in the op table
(wire/ops.py) and checked by the Dispatcher before a handler runs.

Anything outside a schema is refused with ``bad_args`` and a message that says what is
allowed, so no request can make the job allocate more than its bounds allow or hand a
string where the optimizer expects a number. Standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


class SchemaError(ValueError):
    """An argument outside its schema; the message names it and what is allowed."""


@dataclass(frozen=True)
class Int:
    lo: int
    hi: int

    def check(self, name: str, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not self.lo <= v <= self.hi:
            raise SchemaError(f"{name} must be a whole number from {self.lo} to {self.hi}, not {_show(v)}")
        return v


@dataclass(frozen=True)
class Num:
    lo: float
    hi: float

    def check(self, name: str, v: Any) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not self.lo <= v <= self.hi:
            raise SchemaError(f"{name} must be a finite number from {self.lo:g} to {self.hi:g}, not {_show(v)}")
        return float(v)


@dataclass(frozen=True)
class Text:
    max_len: int

    def check(self, name: str, v: Any) -> str:
        if not isinstance(v, str) or len(v) > self.max_len:
            raise SchemaError(f"{name} must be a string of at most {self.max_len} characters, not {_show(v)}")
        try:
            v.encode()
        except UnicodeEncodeError:
            raise SchemaError(f"{name} is not valid text (a lone surrogate)") from None
        return v


@dataclass(frozen=True)
class Flag:
    def check(self, name: str, v: Any) -> bool:
        if not isinstance(v, bool):
            raise SchemaError(f"{name} must be true or false, not {_show(v)}")
        return v


@dataclass(frozen=True)
class Choice:
    values: tuple[str, ...]

    def check(self, name: str, v: Any) -> str:
        if v not in self.values:
            raise SchemaError(f"{name} must be one of {', '.join(self.values)}, not {_show(v)}")
        return v


@dataclass(frozen=True)
class Maybe:
    inner: Int | Num | Text | Flag | Choice

    def check(self, name: str, v: Any) -> Any:
        return None if v is None else self.inner.check(name, v)


Spec = Int | Num | Text | Flag | Choice | Maybe


def check_args(op: str, schema: dict[str, Spec], args: dict[str, Any]) -> dict[str, Any]:
    """`args` checked against `schema`; SchemaError names the first one that is not allowed."""
    unknown = sorted(set(args) - set(schema))
    if unknown:
        allowed = ", ".join(schema) or "no arguments"
        raise SchemaError(f"{op} takes {allowed}; not {', '.join(unknown)}")
    return {k: schema[k].check(k, v) for k, v in args.items()}


def _show(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."
