"""A job-wide stall report as text: one line per rank (the agent says it, the console's
`ranks` and the TUI's Ranks panel show it). The report itself is made by the agent
(agent/breaks/job_stall.py); this is only how its rows read."""

from __future__ import annotations

import os
from typing import Any


def at(where: dict[str, Any] | None) -> str:
    return f"{os.path.basename(where['file'])}:{where['line']}" if where else "an unknown line"


def collective_text(c: dict[str, Any]) -> str:
    """'all_reduce #12 on metrics' or "all_reduce (DDP's gradient buckets, in backward)"."""
    if c.get("seq") is None:
        return f"{c['op']} ({c['by']})" if c.get("by") else c["op"]
    return f"{c['op']} #{c['seq']} on {c['group']}"


def rank_line(row: dict[str, Any]) -> str:
    """'rank 1  step 5  backward  ddp_train.py:52  in all_reduce (...) for 6.1s'."""
    if not row.get("answered"):
        return f"rank {row['rank']}  did not answer (dead, or its agent is stuck)"
    c = row.get("current")
    doing = (f"in {collective_text(c)} for {c['started_s_ago']:g}s" if c
             else f"not in a collective, no progress for {row['idle_s']:g}s")
    last = row.get("last")
    done = f"; last done: {collective_text(last)}" if last and not c else ""
    return f"rank {row['rank']}  step {row['step']}  {row['phase']}  {at(row.get('where'))}  {doing}{done}"


def report_lines(details: dict[str, Any]) -> list[str]:
    """A stall break's job-wide part: the diagnosis, then a line per rank (none on one rank)."""
    rows = details.get("ranks") or []
    if not rows:
        return []
    return [f"job: {details.get('diagnosis', '')}", *(f"  {rank_line(r)}" for r in rows)]
