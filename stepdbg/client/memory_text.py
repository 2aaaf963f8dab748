"""The memory op's answer in words, for the console's ``info mem`` and the TUI's Memory panel:
memory by category with bars, the largest tensors, each device's allocator line, the
out-of-memory cause and the snapshot file."""

from __future__ import annotations

from typing import Any

from ..wire.conditions import format_size

LABELS = {"parameters": "parameters", "gradients": "gradients", "optimizer_state": "optimizer state",
          "batch": "batch", "activations": "saved activations", "other_tensors": "other tensors",
          "stepdbg": "held by stepdbg"}
BAR = 24


def category_rows(mem: dict[str, Any]) -> list[tuple[str, int, float]]:
    """(label, bytes, share of the counted bytes) per category, in the census's order."""
    cats = mem.get("by_category") or {}
    total = max(1, sum(cats.values()))
    return [(LABELS.get(k, k), v, v / total) for k, v in cats.items()]


def bar(share: float, width: int = BAR) -> str:
    filled = round(share * width)
    return "█" * filled + "·" * (width - filled)


def allocator_lines(mem: dict[str, Any]) -> list[str]:
    """Host RSS, and per CUDA device what the allocator holds (tensors, cached, fragmented,
    what no counted tensor explains), peak and capacity."""
    lines = [f"host RSS {format_size(mem.get('host_rss') or 0)}"]
    for d in mem.get("cuda", []):
        line = (f"cuda:{d['device']} {d['name']}: allocated {format_size(d['allocated'])}, reserved "
                f"{format_size(d['reserved'])}, peak {format_size(d['peak_allocated'])} of {format_size(d['total'])}")
        if d.get("fragmented") is not None:
            line += f"; fragmented {format_size(d['fragmented'])}"
        if d.get("unattributed") is not None:
            line += f"; not in any counted tensor {format_size(d['unattributed'])}"
        lines.append(line)
    if not mem.get("cuda"):
        lines.append("no CUDA in use: mem>SIZE compares host RSS")
    return lines


def snapshot_hint(mem: dict[str, Any]) -> str:
    path = mem.get("memory_snapshot")
    if path:
        return f"allocation history: {path} (open it at https://pytorch.org/memory_viz)"
    if mem.get("cuda") and not mem.get("record_memory"):
        return "start with --record-memory for an allocation snapshot (pytorch.org/memory_viz) at a break"
    return ""


def memory_lines(mem: dict[str, Any], largest: int = 8) -> list[str]:
    """The console's ``info mem``."""
    lines = allocator_lines(mem)
    oom = mem.get("oom")
    if oom and oom.get("cause"):
        lines.append(f"out of memory ({format_size(oom['asked'] or 0)} asked), {oom['cause']['rule']}: "
                     f"{oom['cause']['text']}")
    if mem.get("by_category") is None:
        lines.append("memory by category is counted at a pause (pause the job, then info mem)")
    else:
        lines.append(f"tensors by category ({format_size(mem['counted'])} counted, each storage once):")
        lines += [f"  {label:<18} {format_size(n):>8}  {bar(share)} {share:4.0%}"
                  for label, n, share in category_rows(mem)]
        lines.append("largest tensors:")
        lines += [f"  {format_size(r['bytes']):>8}  {r['name']:<36} {LABELS.get(r['category'], r['category']):<18} "
                  f"{r['dtype']} {r['shape']} {r['device']}" for r in mem.get("largest", [])[:largest]]
    lines += partial_lines(mem)
    hint = snapshot_hint(mem)
    return lines + ([hint] if hint else [])


def partial_lines(mem: dict[str, Any]) -> list[str]:
    """What the census left out, said (a view with a cost bound answers in part)."""
    out = []
    walked = (mem.get("partial") or {}).get("autograd_nodes")
    if walked:
        out.append(f"in part: saved activations found in the first {walked['walked']:,} autograd nodes of the "
                   f"paused frames' graphs (the limit; the graphs go on)")
    if mem.get("skipped"):
        out.append(f"in part: {mem['skipped']} tensor(s) could not be counted (no sizes or storage, e.g. nested)")
    return out
