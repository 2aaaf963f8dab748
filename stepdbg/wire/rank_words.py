"""Ranks in a person's words: 'rank 1', 'ranks 0 and 1', 'ranks 0, 2 and 3' (a Python list,
`ranks [1]`, was said after `o` and `on 1`). Standard library only."""

from __future__ import annotations

from collections.abc import Iterable


def ranks_words(ranks: Iterable[int]) -> str:
    """'rank 1', 'ranks 0 and 1', 'ranks 0, 2 and 3' (each once, in order); 'no rank'."""
    rs = sorted(set(ranks))
    if not rs:
        return "no rank"
    if len(rs) == 1:
        return f"rank {rs[0]}"
    return f"ranks {', '.join(map(str, rs[:-1]))} and {rs[-1]}"


def targets_words(targets: Iterable[int] | None) -> str:
    """Who gets a job's stepping and changes (`o` in the TUI, `on` at the console): every
    rank (None), or the ranks chosen."""
    return f"stepping and changes go to {'every rank' if targets is None else ranks_words(targets)}"
