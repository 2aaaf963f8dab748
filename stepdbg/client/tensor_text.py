"""A tensor summary (the `summary` op's answer) in words, for the console and the TUI."""

from __future__ import annotations

from typing import Any


def format_summary(s: dict[str, Any]) -> str:
    """One or two lines for a tensor summary: what `p EXPR` prints, its first line as the
    locals show a tensor ('loss: float32 [] on cpu requires_grad'), then its one value
    ('value nan') or its statistics and counts, named ('...; nan: 0, inf: 0, zeros: 3 of
    32': 'nan 1 inf 0' read as a list of numbers). Where the job said why there is no
    tensor (`x.grad is None: ...`, a module without parameters), its words."""
    if s.get("words"):
        return str(s["words"])
    if s.get("type") != "Tensor":
        return f"{s.get('name')}: {s.get('type')} {s.get('repr', '')}".rstrip()
    head = f"{s['name']}: {s['dtype']} {s['shape']} on {s['device']}" + (" requires_grad" if s.get("requires_grad") else "")
    head += shard_text(s) + sampled_text(s)
    if s.get("note"):
        return f"{head}  ({s['note']})"
    if "nan" not in s:  # (an empty or sparse tensor: no values read)
        return head
    counts = f"nan: {s['nan']}, inf: {s['inf']}"
    if counted(s) == 1:  # one value: the value itself
        value = "nan" if s["nan"] else ("-inf" if s.get("neg_inf") else "inf") if s["inf"] else "{:.6g}".format(s["min"])
        return f"{head}\n  value {value}"
    if "min" not in s:
        return f"{head}\n  no finite value: {counts}"
    def g(v: Any) -> str:  # (a mean, std or norm that overflowed comes as its word: 'inf')
        return v if isinstance(v, str) else f"{v:.4g}"

    return (f"{head}\n  {finite_text(s)}min {g(s['min'])} max {g(s['max'])} mean {g(s['mean'])} std {g(s['std'])} "
            f"norm {g(s['norm'])}; {counts}, zeros: {s['zeros']} of {counted(s)}")


def counted(s: dict[str, Any]) -> int:
    """How many elements the statistics cover: a sample, a DTensor's shard on this rank, else all."""
    if s.get("sampled"):
        return s["sampled"]["values"]
    return (s.get("shard") or s)["numel"]


def sampled_text(s: dict[str, Any]) -> str:
    """That a huge tensor's statistics are of an even sample, and of how many values."""
    sm = s.get("sampled")
    return f" (statistics of {sm['values']:,} evenly spaced values of {sm['of']:,})" if sm else ""


def shard_text(s: dict[str, Any]) -> str:
    """What a DTensor's summary covers: this rank's shard (empty for a plain tensor)."""
    sh = s.get("shard")
    return f" (DTensor; this rank holds {sh['shape']}, {', '.join(sh['placements'])}; statistics of that shard)" if sh else ""


def finite_text(s: dict[str, Any]) -> str:
    """Before the statistics when some values are nan or inf: they are of the finite values
    only (`min 0 max 4.44 ... inf 19` read as if 4.44 were the largest value)."""
    return "finite values: " if s.get("nan") or s.get("inf") else ""
