"""A break as it is told to front ends: its record with each string cut to WORDS_MOST.

A break's words come from the user's code: an error's message (a loop's own check that
raised with a batch's ids in one 6 MB line) is the break's reason, its `message` and, with
its traceback, its `traceback`. Told whole, the `paused` event and the end's `exited` were
over the wire's 16 MB frame, which the server drops (no client heard the pause nor the end),
the status (and so the attach's welcome) could not be sent, and every status poll of a job
that ran on carried the reason whole. The job's own report keeps the break whole."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from stepdbg.agent.breaks.controls import Break
from stepdbg.wire.protocol import plain

WORDS_MOST = 16_384  # characters of one string of a break told to a front end


def cut(text: str, most: int = WORDS_MOST) -> str:
    """`text`, or its first `most` characters and how many more there were."""
    return text if len(text) <= most else f"{text[:most]}… [stepdbg: {len(text) - most} more characters not shown]"


def told(brk: Break | dict[str, Any]) -> dict[str, Any]:
    """The break's record (asdict) as plain JSON data (protocol.plain: a user's object is its
    str), every string in it cut to WORDS_MOST."""
    out = cut_all(plain(asdict(brk) if isinstance(brk, Break) else brk))
    assert isinstance(out, dict)
    return out


def cut_all(value: Any) -> Any:
    """`value` (plain data) with every string in it cut to WORDS_MOST."""
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, dict):
        return {k: cut_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [cut_all(v) for v in value]
    return value
