"""`stepdbg diff`'s record and its comparison (the standard library only).

A record is JSON lines written by the job (stepdbg/agent/diff/recorder.py): a header
line, then per step its entries in the order they happened and a ``step`` line, then an
``end`` line. An entry is ``{step, phase, module, what, call, fp}`` (plus ``class``,
``file``, ``line``, ``defined_at`` for a module's call, ``root`` for the arguments of a
model the step calls after its first, a head after its encoder); ``fp`` is a tensor's fingerprint:
``shape``, ``dtype``, ``hash`` (of its bytes), ``nonfinite``, ``stats`` (mean, mean |x|,
rms, max |x| of the finite values) and ``samples`` (values at evenly spaced positions);
or, for a tensor that could not be read, ``unreadable`` (why) in place of the numbers.

``first_divergence(a, b, atol, rtol)`` walks two records in order and returns the first
entry that differs, as the JSON answer's ``first_divergence`` object, or None. Bitwise
(atol = rtol = 0): the hashes differ. With a tolerance: a fingerprint number differs by
more than ``atol + rtol * |B|`` (numpy's isclose), or the shapes, dtypes or counts of
non-finite values differ.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass, field
from typing import Any

FORMAT_VERSION = 1  # of the record (the recorder writes it in its header)
MAX_LINE = 1_000_000  # characters of one record line (a fingerprint is a few hundred)
TEXT = ("phase", "module", "what", "class", "file", "defined_at")  # an entry's words: text or absent (the last 3 None)
# A record's words are printed: its control characters (a newline forging a line, a
# terminal's escape) are shown as escapes, never sent to the terminal.
PLAIN = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}
PHASES = ("input", "forward", "loss", "backward", "optimizer")
MAX_DRAWS = 64  # draws, and sources moved, a step line's randomness holds when read


class RecordError(ValueError):
    """A record file that is not one stepdbg wrote."""


@dataclass
class Record:
    """One run's fingerprints: entries by step, and what each step's line said."""

    steps: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    step_lines: dict[int, dict[str, Any]] = field(default_factory=dict)
    error: str | None = None  # the recorder failed (the job went on without it)
    ended: bool = False
    bundle: bool = False  # a bundle's record (one step's forward and backward: no loss nor update)
    max_calls: int | None = None  # module calls a step it recorded at most (its header's)

    def complete_steps(self) -> list[int]:
        return sorted(self.step_lines)

    def entries(self) -> int:
        return sum(len(v) for s, v in self.steps.items() if s in self.step_lines)

    def unreadable(self) -> list[str]:
        """The entries whose tensor could not be read (compared by shape and dtype only),
        each as "where: why"."""
        return [f"step {s}, {_label(e)}: {e['fp']['unreadable'][:200]}" for s, v in sorted(self.steps.items())
                if s in self.step_lines for e in v if isinstance(e["fp"].get("unreadable"), str)]


def read_record(path: str, max_bytes: int | None = None, max_entries: int | None = None) -> Record:
    """The record at `path`; RecordError for a file stepdbg did not write (a run writes its
    own record: its script may write anything there; a kept one anyone may hand over).
    Lines are read at most MAX_LINE long; at most `max_bytes` and `max_entries` when given
    (a file that grows while it is read stops there)."""
    rec, count = Record(), 0
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # (a FIFO put in its place: no hang)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RecordError("it is not a regular file")
    with open(fd, encoding="utf-8", errors="replace") as f:
        for n, obj in _lines(f, max_bytes):
            kind = obj.get("kind")
            if n == 1:
                _header(rec, obj)
            elif kind == "step":
                rec.step_lines[_step(obj, n)] = _step_line(obj, n)
            elif kind == "end":
                rec.error, rec.ended = _text(obj.get("error")), True
            elif kind is None:
                count += 1
                if max_entries is not None and count > max_entries:
                    raise RecordError(f"it holds over {max_entries:,} fingerprints")
                rec.steps.setdefault(_step(obj, n), []).append(_entry(obj, n))
    return rec


def _lines(f: Any, max_bytes: int | None) -> Any:
    """(line number, JSON object) of each line, the first a header."""
    n = size = 0
    while line := f.readline(MAX_LINE + 1):
        n, size = n + 1, size + len(line)
        if len(line) > MAX_LINE:
            raise RecordError(f"line {n} is over {MAX_LINE:,} characters long")
        if max_bytes is not None and size > max_bytes:
            raise RecordError(f"it is over {max_bytes:,} bytes (it grew while it was read?)")
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            raise RecordError(f"line {n} is not JSON") from None
        if not isinstance(obj, dict) or (n == 1 and obj.get("kind") != "header"):
            raise RecordError(f"line {n} is not a record line")
        yield n, obj


def _header(rec: Record, obj: dict[str, Any]) -> None:
    if obj.get("version") != FORMAT_VERSION:
        raise RecordError(f"its format is {_text(obj.get('version'))!s:.20}, this stepdbg reads {FORMAT_VERSION}")
    cap = obj.get("max_calls")
    rec.max_calls = cap if type(cap) is int and cap > 0 else None
    rec.bundle = isinstance(obj.get("bundle"), str)


def _step(obj: dict[str, Any], n: int) -> int:
    step = obj.get("step")
    if type(step) is not int or not 0 <= step < 2**53:
        raise RecordError(f"line {n}: step is not a step number")
    return step


def _count(value: Any) -> bool:
    return value is None or (type(value) is int and 0 <= value < 2**53)


def _step_line(obj: dict[str, Any], n: int) -> dict[str, Any]:
    if not (_count(obj.get("capped")) and _count(obj.get("calls"))):
        raise RecordError(f"line {n}: a step's counts are not counts")
    if "randomness" in obj:
        obj["randomness"] = _drawn(obj["randomness"], n)
    return obj


def _drawn(value: Any, n: int) -> dict[str, Any]:
    """A step line's randomness (stepdbg/agent/diff/randomness.StepDraws), its words made plain."""
    if not isinstance(value, dict) or not all(isinstance(value.get(k, []), list) for k in ("draws", "moved")) \
            or not isinstance(value.get("states", {}), dict):
        raise RecordError(f"line {n}: a step's randomness is not a list of draws")
    draws = []
    for d in value.get("draws", [])[:MAX_DRAWS]:
        if not isinstance(d, dict) or not _count(d.get("line")) or \
                not all(isinstance(d.get(k), str) for k in ("source", "call")) or \
                not all(isinstance(d.get(k) or "", str) for k in ("file", "code", "module")):
            raise RecordError(f"line {n}: a step's draw is not a draw")
        draws.append({k: _text(v) if isinstance(v, str) else v for k, v in d.items()})
    return {"draws": draws, "moved": [_text(m) for m in value.get("moved", [])[:MAX_DRAWS]],
            "states": {_text(k): _text(v) for k, v in list(value.get("states", {}).items())[:MAX_DRAWS]}}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:1000].translate(PLAIN)


def _finite_able(x: Any) -> bool:
    """A number that float() takes (10**400 is an int JSON gives, that float() refuses)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return not isinstance(x, int) or abs(x) < 2**1023


def _entry(obj: dict[str, Any], n: int) -> dict[str, Any]:
    """An entry whose fingerprint holds what compare() reads, of the types it reads, its
    words made plain."""
    fp = obj.get("fp")
    if not isinstance(fp, dict) or not all(isinstance(obj.get(k, ""), str) for k in TEXT[:3]) or \
            not all(isinstance(obj.get(k) or "", str) for k in TEXT[3:]):
        raise RecordError(f"line {n} is not a fingerprint entry")
    numbers = [*fp.get("stats", []), *fp.get("samples", [])] if isinstance(fp.get("stats", []), list) and \
        isinstance(fp.get("samples", []), list) else None
    if numbers is None or not all(_finite_able(x) for x in numbers):
        raise RecordError(f"line {n}: a fingerprint's numbers are not numbers")
    if "value" in fp and fp["value"] is not None and not isinstance(fp["value"], str) and \
            not _finite_able(fp["value"]):
        raise RecordError(f"line {n}: a fingerprint's value is not a number")
    if type(obj.get("call", 0)) is not int or not _count(obj.get("line")):
        raise RecordError(f"line {n}: call or line is not a number")
    for key in TEXT:
        if isinstance(obj.get(key), str):
            obj[key] = obj[key].translate(PLAIN)
    for key, value in fp.items():
        if isinstance(value, str):
            fp[key] = value.translate(PLAIN)
    return obj


def _numbers(fp: dict[str, Any]) -> list[float]:
    if "value" in fp:
        v = fp["value"]
        return [float(v)] if isinstance(v, (int, float)) and not isinstance(v, bool) else []
    return [float(x) for x in [*fp.get("stats", []), *fp.get("samples", [])]]


def _same_special(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or (math.isinf(x) and x == y)


def compare(fa: dict[str, Any], fb: dict[str, Any], atol: float, rtol: float) -> dict[str, Any] | None:
    """How two fingerprints differ ({reason, max_abs, max_rel, past}), or None if they agree.
    `past`: how many times the tolerance the largest difference is (None when bitwise)."""
    for key, words in (("none", "one is None"), ("shape", "shapes differ"), ("dtype", "dtypes differ"),
                       ("parts", "the nested tensors' parts differ in shape"), ("unreadable", "one could not be read")):
        if fa.get(key) != fb.get(key):
            return {"reason": f"{words}: {fa.get(key)} vs {fb.get(key)}", "max_abs": None, "max_rel": None,
                    "past": None}
    xs, ys = _numbers(fa), _numbers(fb)
    max_abs, max_rel, past = _distances(xs, ys, atol, rtol)
    bitwise = atol == 0 and rtol == 0
    if fa.get("nonfinite") != fb.get("nonfinite"):
        return {"reason": f"non-finite values: {fa.get('nonfinite')} vs {fb.get('nonfinite')}",
                "max_abs": _num(max_abs), "max_rel": _num(max_rel), "past": None}
    if bitwise:
        same_value = fa.get("value") == fb.get("value") or (xs and ys and _same_special(xs[0], ys[0]))
        if fa.get("hash") != fb.get("hash") or not same_value:
            return {"reason": "the bytes differ", "max_abs": _num(max_abs), "max_rel": _num(max_rel), "past": None}
        return None
    if past > 1:
        return {"reason": "past the tolerance", "max_abs": _num(max_abs), "max_rel": _num(max_rel),
                "past": _num(past)}
    return None


def _distances(xs: list[float], ys: list[float], atol: float, rtol: float) -> tuple[float, float, float]:
    """The largest absolute and relative difference between two fingerprints' numbers, and
    how many times its allowance (atol + rtol * |B|) the worst one is."""
    max_abs = max_rel = past = 0.0
    for x, y in zip(xs, ys, strict=False):
        if _same_special(x, y):
            continue
        d = abs(x - y)
        if math.isnan(d):  # a NaN against a number
            return math.inf, math.inf, math.inf
        max_abs = max(max_abs, d)
        scale = max(abs(x), abs(y))
        if scale > 0:
            max_rel = max(max_rel, d / scale)
        allowed = atol + rtol * abs(y)
        past = max(past, d / allowed if allowed > 0 else (math.inf if d > 0 else 0.0))
    return max_abs, max_rel, past


def _num(x: float) -> float | None:
    return None if math.isinf(x) or math.isnan(x) else float(f"{x:.4g}")


def nonnegative(flag: str, value: str, what: str = "a number >= 0 (e.g. 1e-6)") -> float:
    """A tolerance (--atol, --rtol; or any number >= 0) as typed; ValueError that says what is allowed."""
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not 0 <= x < math.inf:
        raise ValueError(f"{flag} needs {what}, not {value!r}")
    return x


def _key(e: dict[str, Any]) -> tuple[Any, ...]:
    return (e.get("phase"), e.get("module"), e.get("what"), e.get("call"))


def _label(e: dict[str, Any]) -> str:
    module = e.get("module") or ""
    what = e.get("what", "")
    if e.get("phase") == "forward":
        cls = f" ({e['class']})" if e.get("class") else ""
        return f"{module or 'the model'}{cls} {what}, call {e.get('call', 0)}"
    if e.get("phase") == "loss":
        return "the loss" + (f" (call {e['call']})" if e.get("call") else "")
    return f"{module + '.' if module else ''}{what}"


def first_divergence(a: Record, b: Record, steps: list[int], atol: float = 0.0,
                     rtol: float = 0.0) -> dict[str, Any] | None:
    """The first entry, in the order the steps ran, where `a` and `b` differ."""
    for s in steps:
        ea, eb = a.steps.get(s, []), b.steps.get(s, [])
        for i in range(max(len(ea), len(eb))):
            x = ea[i] if i < len(ea) else None
            y = eb[i] if i < len(eb) else None
            if x is None or y is None or _key(x) != _key(y):
                return _structural(s, x, y)
            diff = compare(x["fp"], y["fp"], atol, rtol)
            if diff is not None:
                return _answer(s, x, diff, atol, rtol)
    return None


def _where(e: dict[str, Any]) -> dict[str, Any]:
    module = e.get("module") or ""
    if e.get("phase") == "forward" and e.get("what", "").startswith("input") and not e.get("root"):
        # A module's argument differs while every earlier output agreed: the difference was
        # made by its caller's own code, between its calls (the call's line is in it).
        module = module.rpartition(".")[0]
    moved_up = module != (e.get("module") or "")
    return {"module": module, "class": e.get("class") if not moved_up else None,
            **({"input_of": e.get("module")} if moved_up else {}),
            "call": e.get("call", 0), "what": e.get("what"), "file": e.get("file"), "line": e.get("line"),
            "defined_at": e.get("defined_at") if module == e.get("module") else None}


def _answer(step: int, e: dict[str, Any], diff: dict[str, Any], atol: float, rtol: float) -> dict[str, Any]:
    where = _where(e)
    phase = e.get("phase")
    at = f", called at {short_path(where['file'])}:{where['line']}," if where.get("file") else ""
    summary = f"step {step}, {phase}: {_label(e)}{at} is the first to differ: {diff['reason']}"
    if diff["max_abs"] is not None:
        summary += f"; max |A-B| {diff['max_abs']:g}, max relative {diff['max_rel']:g} over its fingerprint"
    if diff["past"] is not None:
        summary += f", {diff['past']:g}x the tolerance"
    if where["module"] != (e.get("module") or ""):
        summary += f"; its inputs were made in {where['module'] or 'the model'}'s own code, between module calls"
    elif e.get("root") and str(e.get("what", "")).startswith("input"):
        summary += "; a model the step calls itself: its inputs were made in the step's own code, before that line"
    return {"step": step, "phase": phase, **where, "max_abs": diff["max_abs"], "max_rel": diff["max_rel"],
            "past_tolerance": diff["past"], "reason": diff["reason"], "summary": summary}


def short_path(path: str | None) -> str:
    """A path as the user would type it: relative to the current folder when inside it."""
    if not path:
        return "?"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _structural(step: int, x: dict[str, Any] | None, y: dict[str, Any] | None) -> dict[str, Any]:
    first = x or y or {}
    where = _where(first)
    words = (f"A records {_label(x)} where B records {_label(y)}" if x and y else
             f"only {'A' if x else 'B'} records {_label(first)}")
    return {"step": step, "phase": first.get("phase"), **where, "max_abs": None, "max_rel": None,
            "past_tolerance": None, "reason": "the runs took different paths",
            "summary": f"step {step}: the runs took different paths: {words}"}

